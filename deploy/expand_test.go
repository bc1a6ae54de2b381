package deploy

import (
	"fmt"
	"regexp"
	"strings"
)

// Kubernetes expands $(VAR) in a container's command, args and env values with the container's
// environment; $$ is a literal $. An undefined reference is left as written — the process would
// then see the literal text "$(VAR)", which is never what a manifest means, so the checks treat it
// as an error.

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand substitutes $(VAR) from vars and returns the names it could not resolve.
func expand(s string, vars map[string]string) (string, []string) {
	var undefined []string
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		name := m[2 : len(m)-1]
		if v, ok := vars[name]; ok {
			return v
		}
		undefined = append(undefined, name)
		return m
	})
	return out, undefined
}

// referencedVars returns the names $(NAME) in s references.
func referencedVars(s string) []string {
	var names []string
	for _, m := range varRef.FindAllStringSubmatch(s, -1) {
		if m[1] != "" {
			names = append(names, m[1])
		}
	}
	return names
}

// podEnv returns a container's environment as one pod named pod in namespace ns would see it:
// literal values (themselves expanded with the variables defined before them) and the downward
// API fields the manifests use. An unsupported valueFrom becomes a placeholder that names it.
func podEnv(c *container, pod, ns string) (map[string]string, []error) {
	env := map[string]string{}
	var errs []error
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			v, undef := expand(e.Value, env)
			for _, u := range undef {
				errs = append(errs, fmt.Errorf("container %s: env %s: %w: $(%s)", c.Name, e.Name, ErrUndefinedVar, u))
			}
			env[e.Name] = v
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = pod
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = ns
		default:
			env[e.Name] = "<" + strings.ReplaceAll(e.Name, " ", "_") + ">"
		}
	}
	return env, errs
}

// podArgs returns a container's command and args after expansion for one pod.
func podArgs(c *container, env map[string]string) (command, args []string, errs []error) {
	exp := func(in []string) []string {
		out := make([]string, len(in))
		for i, s := range in {
			var undef []string
			out[i], undef = expand(s, env)
			for _, u := range undef {
				errs = append(errs, fmt.Errorf("container %s: %q: %w: $(%s)", c.Name, s, ErrUndefinedVar, u))
			}
		}
		return out
	}
	return exp(c.Command), exp(c.Args), errs
}
