package aibrixcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// RuleReport aggregates one rule over the whole run.
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

// Options configure [Run].
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
	seenIDs := map[string]string{}
	for i := range cases {
		c := &cases[i]
		if c.NeedsToken && cl.Token == "" {
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

// WriteText writes a human-readable report.
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
