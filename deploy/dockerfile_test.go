package deploy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A small Dockerfile reader: enough of the syntax (comments, line continuations, parser
// directives, stages) to check how deploy/Dockerfile builds kvselect. It is not a Dockerfile
// implementation; it reads what the checks need and never panics.

// instruction is one Dockerfile instruction with its keyword upper-cased.
type instruction struct {
	line int
	op   string
	args string
}

// stage is one FROM section.
type stage struct {
	image string
	name  string
	inst  []instruction
}

// parseDockerfile splits data into stages. Instructions before the first FROM other than ARG are
// an ErrSyntax, as in Docker.
func parseDockerfile(data string) ([]stage, error) {
	var stages []stage
	var buf strings.Builder
	start := 0
	lines := strings.Split(strings.ReplaceAll(data, "\r\n", "\n"), "\n")
	for i, raw := range lines {
		t := strings.TrimSpace(raw)
		if buf.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if buf.Len() > 0 && strings.HasPrefix(t, "#") {
			continue // comment lines inside a continued instruction are dropped
		}
		if buf.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(t, "\\") {
			buf.WriteString(strings.TrimSpace(strings.TrimSuffix(t, "\\")))
			buf.WriteByte(' ')
			if i < len(lines)-1 {
				continue
			}
		} else {
			buf.WriteString(t)
		}
		full := strings.TrimSpace(buf.String())
		buf.Reset()
		if full == "" {
			continue
		}
		op, args, _ := strings.Cut(full, " ")
		in := instruction{line: start, op: strings.ToUpper(op), args: strings.TrimSpace(args)}
		if in.op == "FROM" {
			f := strings.Fields(in.args)
			f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--") })
			if len(f) == 0 {
				return nil, fmt.Errorf("Dockerfile:%d: %w: FROM without image", in.line, ErrSyntax)
			}
			st := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.op == "ARG" {
				continue
			}
			return nil, fmt.Errorf("Dockerfile:%d: %w: %s before FROM", in.line, ErrSyntax, in.op)
		}
		stages[len(stages)-1].inst = append(stages[len(stages)-1].inst, in)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("Dockerfile: %w: no FROM", ErrSyntax)
	}
	return stages, nil
}

// goBuild describes the stage that builds kvselect.
type goBuild struct {
	stage  *stage
	output string // the -o path
	cgoOff bool
}

// findGoBuild returns the stage whose RUN builds ./cmd/kvselect.
func findGoBuild(stages []stage) (*goBuild, error) {
	for i := range stages {
		st := &stages[i]
		env := false
		for _, in := range st.inst {
			if in.op == "ENV" && strings.Contains(strings.ReplaceAll(in.args, " ", "="), "CGO_ENABLED=0") {
				env = true
			}
			if in.op != "RUN" || !strings.Contains(in.args, "go build") {
				continue
			}
			f := strings.Fields(in.args)
			if !slices.Contains(f, "./cmd/kvselect") {
				continue
			}
			b := &goBuild{stage: st, cgoOff: env || slices.Contains(f, "CGO_ENABLED=0")}
			if j := slices.Index(f, "-o"); j >= 0 && j+1 < len(f) {
				b.output = f[j+1]
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("Dockerfile: %w: no RUN go build ... ./cmd/kvselect", ErrDockerfile)
}

// checkDockerfile checks deploy/Dockerfile and records its final USER for the pod checks.
func (c *checker) checkDockerfile() {
	data, err := c.readDeployFile("Dockerfile")
	if err != nil {
		c.add(fmt.Errorf("%w: %w", ErrDockerfile, err))
		return
	}
	uid, errs := dockerfileFindings(string(data), c.src.goVersion, c.src.flags["port"].def)
	c.add(errs...)
	c.dockerUID = uid
}

// dockerfileFindings returns the final stage's numeric USER (-1 when unusable) and what is wrong.
//
// Why each rule: a builder on another Go than go.mod's either fails (older) or changes behaviour
// untested (newer); CGO would link libc, absent from distroless/static and scratch; a final stage
// with a shell and package manager widens the attack surface; the ENTRYPOINT must run the binary
// that was copied; and Kubernetes can only enforce runAsNonRoot for a numeric USER.
func dockerfileFindings(data, goVersion, httpPort string) (int64, []error) {
	stages, err := parseDockerfile(data)
	if err != nil {
		return -1, []error{err}
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("Dockerfile: %w: "+format, append([]any{ErrDockerfile}, a...)...)
	}
	var errs []error
	build, err := findGoBuild(stages)
	if err != nil {
		return -1, []error{err}
	}
	final := &stages[len(stages)-1]
	if build.stage == final {
		errs = append(errs, bad("the build stage is the final stage (want a multi-stage build)"))
	}
	// The builder's Go must be go.mod's major.minor: 1.26.0 → golang:1.26, golang:1.26.x, golang:1.26-xxx.
	mm := majorMinor(goVersion)
	tag := imageTag(build.stage.image)
	if imageRepo(build.stage.image) != "golang" || (tag != mm && !strings.HasPrefix(tag, mm+".") && !strings.HasPrefix(tag, mm+"-")) {
		errs = append(errs, bad("build stage FROM %s, want golang:%s (go.mod)", build.stage.image, mm))
	}
	if !build.cgoOff {
		errs = append(errs, bad("CGO_ENABLED=0 is not set for the static final stage"))
	}
	if build.output == "" {
		errs = append(errs, bad("go build has no -o output path"))
	}
	if !(final.image == "scratch" || strings.HasPrefix(final.image, "gcr.io/distroless/static")) {
		errs = append(errs, bad("final stage FROM %s, want scratch or gcr.io/distroless/static*", final.image))
	}
	uid, dest := int64(-1), ""
	var entry []string
	// Later instructions override earlier ones (USER, ENTRYPOINT), as in Docker.
	for _, in := range final.inst {
		switch in.op {
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && f[0] == "--from="+build.stage.name && build.stage.name != "" && f[1] == build.output {
				dest = f[2]
			}
		case "USER":
			u, _, _ := strings.Cut(in.args, ":")
			if n, err := strconv.ParseInt(u, 10, 64); err == nil {
				uid = n
			} else {
				uid = -1
			}
		case "ENTRYPOINT":
			entry = nil
			if json.Unmarshal([]byte(in.args), &entry) != nil {
				errs = append(errs, bad("ENTRYPOINT %s is not exec (JSON) form", in.args))
			}
		case "EXPOSE":
			if !slices.Contains(strings.Fields(in.args), httpPort) && !slices.Contains(strings.Fields(in.args), httpPort+"/tcp") {
				errs = append(errs, bad("EXPOSE %s does not include kvselect's --port default %s", in.args, httpPort))
			}
		}
	}
	if dest == "" {
		errs = append(errs, bad("final stage does not COPY --from=<build stage> %s", build.output))
	} else if len(entry) == 0 || entry[0] != dest {
		errs = append(errs, bad("ENTRYPOINT %q does not run the copied binary %s", entry, dest))
	}
	if uid <= 0 {
		errs = append(errs, bad("final stage USER must be a numeric non-root uid (runAsNonRoot cannot verify a name)"))
		uid = -1
	}
	return uid, errs
}

// majorMinor returns "1.26" for "1.26.0" (and the input when it has no minor version).
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}
