package deploy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// Checks of NATS server containers (image repository "nats"): the image runs the nats-server
// version kvselect is tested with, and the mounted configuration loads in that version's own
// parser, enables no JetStream, listens on declared ports and routes to every server.

// natsConfigPath returns the value of -c/--config in a nats-server command line.
func natsConfigPath(argv []string) string {
	for i, a := range argv {
		switch {
		case (a == "-c" || a == "--config" || a == "-config") && i+1 < len(argv):
			return argv[i+1]
		case strings.HasPrefix(a, "--config="):
			return strings.TrimPrefix(a, "--config=")
		case strings.HasPrefix(a, "-config="):
			return strings.TrimPrefix(a, "-config=")
		}
	}
	return ""
}

// natsOptions loads conf as nats-server would in pod (env holds the pod's variables; the parser
// resolves $NAME references from the process environment, hence setenv).
func (c *checker) natsOptions(conf string, env map[string]string) (*server.Options, error) {
	for k, v := range env {
		c.setenv(k, v)
	}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(conf); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNATSConfig, err)
	}
	return opts, nil
}

// checkNATS checks every NATS server container of v. The configuration is loaded by the
// nats-server package of go.mod, so an option the shipped image's version rejects (e.g. a too
// short lame_duck_duration, which this check once caught) fails here rather than in a crash loop.
func (c *checker) checkNATS(v *variant) {
	for _, w := range v.workloads {
		ps := &w.spec.Template.Spec
		for i := range ps.Containers {
			ct := &ps.Containers[i]
			if imageRepo(ct.Image) != "nats" {
				continue
			}
			where := fmt.Sprintf("%s container %s", w, ct.Name)
			want := strings.TrimPrefix(c.src.natsServer, "v")
			if tag := imageTag(ct.Image); tag != want && !strings.HasPrefix(tag, want+"-") {
				c.add(fmt.Errorf("%s: %w: image %s, go.mod tests nats-server %s", where, ErrImage, ct.Image, c.src.natsServer))
			}
			path := natsConfigPath(slices.Concat(ct.Command, ct.Args))
			if path == "" {
				c.add(fmt.Errorf("%s: %w: no --config", where, ErrNATSConfig))
				continue
			}
			conf, known, err := v.fileContent(ps, ct, path)
			if err == nil && !known {
				err = fmt.Errorf("%w: %s is not shipped in a ConfigMap", ErrMount, path)
			}
			if err != nil {
				c.add(fmt.Errorf("%s: %w", where, err))
				continue
			}
			c.checkNATSConfig(v, w, ct, where, conf)
		}
	}
}

// checkNATSConfig loads conf once per pod (names and variables differ by pod).
func (c *checker) checkNATSConfig(v *variant, w *workload, ct *container, where, conf string) {
	names := map[string]string{}
	for _, pod := range w.podNames() {
		env, errs := podEnv(ct, pod, v.namespace)
		c.add(errs...)
		opts, err := c.natsOptions(conf, env)
		if err != nil {
			c.add(fmt.Errorf("%s pod %s: %w", where, pod, err))
			return
		}
		// JetStream would make the servers stateful (volumes, quorum) for no benefit: kvselect's
		// events are best-effort by contract and it never creates streams.
		if opts.JetStream {
			c.add(fmt.Errorf("%s pod %s: %w: kvselect uses core NATS only", where, pod, ErrJetStream))
		}
		// Cluster members with equal server names confuse route deduplication and monitoring.
		if opts.ServerName == "" || names[opts.ServerName] != "" {
			c.add(fmt.Errorf("%s pod %s: %w: server_name %q is empty or shared with %s", where, pod, ErrNATSConfig, opts.ServerName, names[opts.ServerName]))
		}
		names[opts.ServerName] = pod
		if opts.Cluster.Name == "" || opts.Cluster.Port <= 0 {
			c.add(fmt.Errorf("%s pod %s: %w: no cluster name and port", where, pod, ErrNATSConfig))
			return
		}
		for what, port := range map[string]int{"port": opts.Port, "cluster.port": opts.Cluster.Port, "http_port": opts.HTTPPort} {
			if port > 0 && resolvePort([]container{*ct}, fmt.Sprint(port)) == 0 {
				c.add(fmt.Errorf("%s pod %s: %w: %s %d is not a container port", where, pod, ErrPort, what, port))
			}
		}
		for _, p := range []*probe{ct.ReadinessProbe, ct.LivenessProbe} {
			if p != nil && p.HTTPGet != nil && resolvePort([]container{*ct}, p.HTTPGet.Port) != opts.HTTPPort {
				c.add(fmt.Errorf("%s: %w: probe port %s is not http_port %d", where, ErrPort, p.HTTPGet.Port, opts.HTTPPort))
			}
		}
		// Recorded for checkBus: a kvselect --nats-url must land on this port.
		c.natsPorts[w] = opts.Port
		routes := make([]string, len(opts.Routes))
		for i, u := range opts.Routes {
			routes[i] = u.String()
		}
		c.add(v.checkRoutes(fmt.Sprintf("%s pod %s cluster.routes", where, pod), routes, w, opts.Cluster.Port)...)
	}
}
