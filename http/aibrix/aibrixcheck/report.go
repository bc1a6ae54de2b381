package aibrixcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// RuleReport aggregates one rule over the whole run. Checks counts the
// exchanges on which the rule was evaluated (a rule behind a failed gate is
// not evaluated), Failures those on which it failed.
type RuleReport struct {
	Rule
	Checks   int      `json:"checks"`
	Failures int      `json:"failures"`
	Details  []string `json:"details,omitempty"` // "case: detail" per failure
}

// Status is "pass", "fail" or "not-checked".
func (r *RuleReport) Status() string {
	switch {
	case r.Failures > 0:
		return "fail"
	case r.Checks == 0:
		return "not-checked"
	}
	return "pass"
}

// CaseReport is the outcome of one case.
type CaseReport struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Passed      bool     `json:"passed"`
	Failures    []Result `json:"failures,omitempty"`
	Decision    string   `json:"decision,omitempty"`
	Target      string   `json:"target,omitempty"`
}

// Report is the result of a run. Passed is true when no Required rule
// failed; Recommended failures are reported but do not fail the run.
type Report struct {
	URL     string        `json:"url"`
	Timeout string        `json:"timeout"`
	Passed  bool          `json:"passed"`
	Rules   []*RuleReport `json:"rules"`
	Cases   []CaseReport  `json:"cases"`
}

// Options configure [Run]. Either URL (with optional Token and Timeout) or
// a ready Client must be given; Cases selects a subset of the suite, for
// example to skip the 270 KB oversized-body case.
type Options struct {
	URL     string
	Token   string
	Timeout time.Duration // per exchange; DefaultTimeout when 0
	Client  *Client       // overrides URL/Token/Timeout when non-nil
	Cases   []Case        // default Suite("aibrix-check-")
}

// Run executes the cases sequentially (so each exchange's deadline measures
// the service, not the checker's own concurrency) and aggregates results.
func Run(ctx context.Context, opt Options) *Report {
	cl := opt.Client
	if cl == nil {
		cl = NewClient(opt.URL, opt.Token, opt.Timeout)
	}
	cases := opt.Cases
	if cases == nil {
		cases = Suite("aibrix-check-")
	}
	timeout := cl.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	rep := &Report{URL: cl.URL, Timeout: timeout.String()}
	byID := map[string]*RuleReport{}
	for _, r := range Rules {
		rr := &RuleReport{Rule: r}
		rep.Rules = append(rep.Rules, rr)
		byID[r.ID] = rr
	}
	// decisionId uniqueness is a property of the whole run, so it is
	// evaluated here rather than per exchange: each decision id is
	// remembered with the case that produced it.
	seenIDs := map[string]string{}
	for i := range cases {
		c := &cases[i]
		if c.NeedsToken && cl.Token == "" {
			// Without a token the service presumably runs without
			// authentication; the auth cases would only test our client.
			continue
		}
		results, d := RunCase(ctx, cl, c)
		if d != nil && d.HasDecisionID && d.DecisionID != "" {
			prev, dup := seenIDs[d.DecisionID]
			results = append(results, Result{Rule: RuleDecisionIDUnique, OK: !dup,
				Detail: map[bool]string{true: "decisionId " + d.DecisionID + " already used by " + prev}[dup]})
			seenIDs[d.DecisionID] = c.Name
		}
		cr := CaseReport{Name: c.Name, Description: c.Description, Passed: true}
		if d != nil {
			cr.Decision, cr.Target = d.Decision, d.TargetID
			if d.HasPort {
				cr.Target = fmt.Sprintf("%s:%d", d.TargetID, d.Port)
			}
		}
		for _, res := range results {
			rr, ok := byID[res.Rule]
			if !ok {
				continue
			}
			rr.Checks++
			if !res.OK {
				rr.Failures++
				rr.Details = append(rr.Details, c.Name+": "+res.Detail)
				if rr.Level == Required {
					cr.Passed = false
				}
				cr.Failures = append(cr.Failures, res)
			}
		}
		rep.Cases = append(rep.Cases, cr)
	}
	// Only Required rules decide the verdict: Recommended ones describe
	// good practice the Gateway does not enforce.
	rep.Passed = true
	for _, rr := range rep.Rules {
		if rr.Level == Required && rr.Failures > 0 {
			rep.Passed = false
		}
	}
	return rep
}

// Rule returns the aggregate for id, or nil.
func (r *Report) Rule(id string) *RuleReport {
	for _, rr := range r.Rules {
		if rr.ID == id {
			return rr
		}
	}
	return nil
}

// WriteText writes a human-readable report: a verdict line, one line per
// rule (PASS, FAIL, WARN for a failed recommended rule, "-" when never
// checked) followed by each failure as "case: detail", then one line per
// case with the decision and target it received.
func (r *Report) WriteText(w io.Writer) error {
	verdict := "PASS"
	if !r.Passed {
		verdict = "FAIL"
	}
	if _, err := fmt.Fprintf(w, "aibrix-check %s (timeout %s): %s\n\n", r.URL, r.Timeout, verdict); err != nil {
		return err
	}
	for _, rr := range r.Rules {
		if _, err := fmt.Fprintf(w, "%-12s %-30s %3d checks  %s\n", statusWord(rr), rr.ID, rr.Checks, rr.Description); err != nil {
			return err
		}
		for _, d := range rr.Details {
			if _, err := fmt.Fprintf(w, "             - %s\n", d); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintln(w)
	for _, c := range r.Cases {
		word := "ok"
		if !c.Passed {
			word = "FAILED"
		}
		if _, err := fmt.Fprintf(w, "case %-32s %-6s %s %s\n", c.Name, word, c.Decision, c.Target); err != nil {
			return err
		}
	}
	return err
}

func statusWord(rr *RuleReport) string {
	switch s := rr.Status(); {
	case s == "fail" && rr.Level == Recommended:
		return "WARN"
	case s == "fail":
		return "FAIL"
	case s == "not-checked":
		return "-"
	}
	return "PASS"
}

// WriteJSON writes the report as indented JSON, each rule with its status.
// The shape is {url, timeout, passed, rules:[{id, description, level,
// checks, failures, details, status}], cases:[{name, description, passed,
// failures, decision, target}]}; it is meant for CI gates and dashboards.
func (r *Report) WriteJSON(w io.Writer) error {
	type ruleOut struct {
		*RuleReport
		Status string `json:"status"`
	}
	out := struct {
		*Report
		Rules []ruleOut `json:"rules"`
	}{Report: r}
	for _, rr := range r.Rules {
		out.Rules = append(out.Rules, ruleOut{rr, rr.Status()})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
