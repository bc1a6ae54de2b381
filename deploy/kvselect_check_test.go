package deploy

import (
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/http/aibrix"
	"github.com/kvselect/kvselect/internal/authtoken"
)

// Checks of kvselect containers (image repository "kvselect"): their arguments against the real
// flag set, environment, probes, scrape annotations, replica identity, peers and bus.

// kvPod is one pod's view of a kvselect container: the flags it would start with.
type kvPod struct {
	w    *workload
	ct   *container
	name string
	fs   *flag.FlagSet
	set  map[string]bool
	src  *sources
}

// value is the flag's effective value: as given, else the declaration's literal default ("" when
// the default is computed).
func (p *kvPod) value(name string) string {
	if p.set[name] {
		return p.fs.Lookup(name).Value.String()
	}
	return p.src.flags[name].def
}

// newFlagSet rebuilds kvselect's flag set from the parsed declarations, with the same value types,
// so that parsing a container's arguments accepts and rejects exactly what the binary would.
func newFlagSet(specs map[string]flagSpec) *flag.FlagSet {
	fs := flag.NewFlagSet("kvselect", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for name, s := range specs {
		switch s.kind {
		case "bool":
			fs.Bool(name, false, "")
		case "int":
			fs.Int(name, 0, "")
		case "int64":
			fs.Int64(name, 0, "")
		case "uint":
			fs.Uint(name, 0, "")
		case "uint64":
			fs.Uint64(name, 0, "")
		case "float64":
			fs.Float64(name, 0, "")
		case "duration":
			fs.Duration(name, 0, "")
		default:
			fs.String(name, "", "")
		}
	}
	return fs
}

// fileFlags name files the binary reads at startup; each must be mounted.
var fileFlags = []string{"aibrix-policy-file", "aibrix-auth-token-file", "router-tracking-key-file",
	"nats-creds", "nats-tls-ca", "nats-tls-cert", "nats-tls-key", "workers-file", "auth-token-file", "tls-cert", "tls-key"}

// checkKVSelect checks every kvselect container of v. Arguments are parsed once per pod, because
// $(VAR) expansion makes them differ by pod (the replica id embeds the pod name); what does not
// depend on the pod (ports, probes, mounts) is checked once per container. Replica ids and peers
// are checked across all kvselect pods of the variant, since they form one replica set.
func (c *checker) checkKVSelect(v *variant) {
	var pods []*kvPod
	for _, w := range v.workloads {
		ps := &w.spec.Template.Spec
		for i := range ps.Containers {
			ct := &ps.Containers[i]
			if imageRepo(ct.Image) != "kvselect" {
				continue
			}
			where := fmt.Sprintf("%s container %s", w, ct.Name)
			if ct.Image != "kvselect:latest" || len(ct.Command) > 0 {
				c.add(fmt.Errorf("%s: %w: want image kvselect:latest with its own entrypoint", where, ErrImage))
			}
			c.checkKVEnv(where, ct)
			var mine []*kvPod
			for _, pod := range w.podNames() {
				p, errs := c.parseKVPod(w, ct, pod, v.namespace)
				c.add(errs...)
				if p != nil {
					mine = append(mine, p)
				}
			}
			if len(mine) > 0 {
				// Ports, probes and mounts do not depend on the pod: check them once.
				c.checkKVContainer(v, mine[0])
			}
			pods = append(pods, mine...)
		}
	}
	c.checkReplicaIDs(pods)
	for _, p := range pods {
		c.checkBus(v, p, len(pods))
	}
}

// checkKVEnv requires every variable to be read by kvselect, by the Go runtime, or by an
// argument's $(VAR) expansion.
func (c *checker) checkKVEnv(where string, ct *container) {
	expanded := map[string]bool{}
	for _, s := range slices.Concat(ct.Command, ct.Args) {
		for _, n := range referencedVars(s) {
			expanded[n] = true
		}
	}
	for _, e := range ct.Env {
		if !c.src.env[e.Name] && !goRuntimeEnv[e.Name] && !expanded[e.Name] {
			c.add(fmt.Errorf("%s: %w: %s", where, ErrEnv, e.Name))
		}
	}
}

// parseKVPod expands and parses the container's arguments as pod would start it.
func (c *checker) parseKVPod(w *workload, ct *container, pod, ns string) (*kvPod, []error) {
	where := fmt.Sprintf("%s pod %s", w, pod)
	env, errs := podEnv(ct, pod, ns)
	_, args, aerrs := podArgs(ct, env)
	errs = append(errs, aerrs...)
	fs := newFlagSet(c.src.flags)
	if err := fs.Parse(args); err != nil {
		return nil, append(errs, fmt.Errorf("%s: %w: %w", where, ErrFlag, err))
	}
	if fs.NArg() > 0 {
		return nil, append(errs, fmt.Errorf("%s: %w: unexpected arguments %q", where, ErrFlag, fs.Args()))
	}
	p := &kvPod{w: w, ct: ct, name: pod, fs: fs, set: map[string]bool{}, src: c.src}
	fs.Visit(func(f *flag.Flag) { p.set[f.Name] = true })
	return p, errs
}

// checkKVContainer checks what is the same for every pod of a kvselect container: ports, probes,
// scrape annotations, mounted files and the API Service.
func (c *checker) checkKVContainer(v *variant, p *kvPod) {
	w, ct := p.w, p.ct
	where := fmt.Sprintf("%s container %s", w, ct.Name)
	// The HTTP port every other reference must agree with: probes, annotations, the API Service,
	// and (in checkGateway) the AIBrix endpoint.
	port, err := strconv.Atoi(p.value("port"))
	if err != nil || resolvePort([]container{*ct}, strconv.Itoa(port)) == 0 {
		c.add(fmt.Errorf("%s: %w: --port %q is not a declared container port", where, ErrPort, p.value("port")))
	}
	c.kvHTTP[w], c.kvAIBrix[w] = port, p.value("aibrix-path")

	for _, pr := range []struct {
		name, want string
		probe      *probe
	}{{"readinessProbe", "/ready", ct.ReadinessProbe}, {"livenessProbe", "/health", ct.LivenessProbe}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			c.add(fmt.Errorf("%s: %w: no httpGet %s", where, ErrProbe, pr.name))
			continue
		}
		c.checkServed(where+" "+pr.name, pr.probe.HTTPGet.Path)
		if pr.probe.HTTPGet.Path != pr.want {
			c.add(fmt.Errorf("%s: %w: %s on %s, want %s", where, ErrProbe, pr.name, pr.probe.HTTPGet.Path, pr.want))
		}
		if resolvePort([]container{*ct}, pr.probe.HTTPGet.Port) != port {
			c.add(fmt.Errorf("%s: %w: %s port %s is not --port %d", where, ErrPort, pr.name, pr.probe.HTTPGet.Port, port))
		}
	}

	// Prometheus' kubernetes_sd "pod" role conventionally reads these three annotations; a path
	// the API does not serve would be scraped as 404 forever without anyone noticing.
	ann := w.spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] == "" || ann["prometheus.io/port"] == "" {
		c.add(fmt.Errorf("%s: %w: prometheus.io/scrape, path and port annotations", w, ErrMissingField))
	} else {
		c.checkServed(w.String()+" prometheus.io/path", ann["prometheus.io/path"])
		if ann["prometheus.io/port"] != strconv.Itoa(port) {
			c.add(fmt.Errorf("%s: %w: prometheus.io/port %s is not --port %d", w, ErrPort, ann["prometheus.io/port"], port))
		}
	}

	// A file flag pointing at an unmounted path makes the binary exit at startup (the policy and
	// token loaders fail on a missing file), i.e. a crash loop. Shipped content is validated with
	// the loader the binary uses.
	for _, name := range fileFlags {
		path := p.value(name)
		if path == "" {
			continue
		}
		content, known, err := v.fileContent(&w.spec.Template.Spec, ct, path)
		if err != nil {
			c.add(fmt.Errorf("%s: --%s: %w", where, name, err))
			continue
		}
		if !known {
			continue
		}
		switch name {
		case "aibrix-policy-file":
			pol, err := aibrix.ParsePolicy([]byte(content))
			if err != nil {
				c.add(fmt.Errorf("%s: --%s: %w: %w", where, name, ErrPolicy, err))
			} else {
				c.policies = append(c.policies, pol)
			}
		case "aibrix-auth-token-file", "auth-token-file":
			if _, err := authtoken.Parse([]byte(content)); err != nil {
				c.add(fmt.Errorf("%s: --%s: %w: %w", where, name, ErrPolicy, err))
			}
		case "workers-file":
			// The file the binary will read first: it must parse, or every restart comes up
			// with an empty catalog (and stays unready).
			if _, err := core.ParseWorkersFile([]byte(content)); err != nil {
				c.add(fmt.Errorf("%s: --%s: %w: %w", where, name, ErrPolicy, err))
			}
		}
	}

	if w.Kind == "StatefulSet" && w.replicas() > 1 && w.spec.PodManagementPolicy != "Parallel" {
		// /ready is 503 until workers are registered on the replica, so OrderedReady would never
		// start the second pod.
		c.add(fmt.Errorf("%s: %w: podManagementPolicy must be Parallel (readiness waits for worker registration)", w, ErrStatefulSet))
	}
	// Clients need one stable, load-balanced address that only reaches ready replicas: a
	// ClusterIP Service exposing --port. (The headless Service reaches unready pods too.)
	api := false
	for _, s := range v.services {
		if s.spec.headless() || !selects(s.spec.Selector, w.spec.Template.Metadata.Labels) {
			continue
		}
		for _, sp := range s.spec.Ports {
			ref := sp.TargetPort
			if ref == "" {
				ref = strconv.Itoa(sp.Port)
			}
			api = api || (sp.Port == port && resolvePort([]container{*ct}, ref) == port)
		}
	}
	if !api {
		c.add(fmt.Errorf("%s: %w: no ClusterIP Service serves --port %d on port %d", w, ErrService, port, port))
	}
}

// checkServed requires path to be a GET route of the HTTP API.
func (c *checker) checkServed(where, path string) {
	if !c.src.routes["GET "+path] {
		c.add(fmt.Errorf("%s: %w: GET %s is not registered in %s", where, ErrRoute, path, routesSource))
	}
}

// checkReplicaIDs requires every kvselect pod of the variant to announce a distinct replica id
// (the binary's default is tcp://<hostname>:<port>), and peers to name other replicas.
func (c *checker) checkReplicaIDs(pods []*kvPod) {
	ids := map[string]string{}
	for _, p := range pods {
		id := p.value("replica-id")
		if id == "" {
			port := p.value("replica-sync-port")
			if port == "" || port == "0" {
				port = p.value("port")
			}
			id = "tcp://" + net.JoinHostPort(p.name, port)
		}
		if prev, dup := ids[id]; dup {
			c.add(fmt.Errorf("%s pod %s: %w: %q also announced by %s", p.w, p.name, ErrReplicaID, id, prev))
		}
		ids[id] = p.name
	}
	// A replica applies lifecycle events only from its peers. With several replicas and no peer
	// source, every replica would ignore the others' bookings and overload workers.
	for _, p := range pods {
		peers := splitList(p.value("replica-sync-peers"))
		if len(pods) > 1 && len(peers) == 0 && p.value("discover-peers") != "true" {
			c.add(fmt.Errorf("%s pod %s: %w: neither --discover-peers nor --replica-sync-peers", p.w, p.name, ErrPeers))
		}
		for _, peer := range peers {
			if owner, ok := ids[peer]; !ok || owner == p.name {
				c.add(fmt.Errorf("%s pod %s: %w: peer %q is not another replica", p.w, p.name, ErrPeers, peer))
			}
		}
	}
}

// checkBus requires replicas to share one bus: an external NATS whose URLs resolve to the NATS
// servers' client port, or embedded servers that form a cluster over routes to every replica.
func (c *checker) checkBus(v *variant, p *kvPod, replicas int) {
	where := fmt.Sprintf("%s pod %s", p.w, p.name)
	// cmd/kvselect starts an embedded server only when --nats-url is empty, so embedded flags next
	// to --nats-url are silently ignored: a sign the author meant something else.
	embedded := []string{"nats-listen", "nats-cluster-listen", "nats-cluster-routes"}
	if url := p.value("nats-url"); url != "" {
		for _, f := range embedded {
			if p.value(f) != "" {
				c.add(fmt.Errorf("%s: %w: --%s is ignored with --nats-url", where, ErrBus, f))
			}
		}
		for _, u := range splitList(url) {
			host, port, _, err := splitURL(u, 4222)
			if err != nil {
				c.add(fmt.Errorf("%s: --nats-url %s: %w", where, u, err))
				continue
			}
			ts, err := v.resolve(host, port, v.namespace)
			if err != nil {
				c.add(fmt.Errorf("%s: --nats-url %s: %w", where, u, err))
			}
			for _, t := range ts {
				if np, ok := c.natsPorts[t.w]; !ok || np != t.port {
					c.add(fmt.Errorf("%s: %w: --nats-url %s reaches %s port %d, not a NATS client port", where, ErrPort, u, t.w, t.port))
				}
			}
		}
		return
	}
	// Embedded mode. Without clustering, each replica would publish on a private in-process
	// server and no lifecycle event would ever reach a peer, while every replica still looks
	// healthy: the failure this check exists for.
	listen := p.value("nats-cluster-listen")
	if listen == "" {
		if replicas > 1 {
			c.add(fmt.Errorf("%s: %w: no --nats-url and no --nats-cluster-listen: a private bus per replica", where, ErrBus))
		}
		return
	}
	host, portStr, err := net.SplitHostPort(listen)
	port, _ := strconv.Atoi(portStr)
	if err != nil || host == "127.0.0.1" || host == "localhost" || host == "::1" {
		c.add(fmt.Errorf("%s: %w: --nats-cluster-listen %q is not reachable from other pods", where, ErrBus, listen))
		return
	}
	// The port must be declared so that the headless Service and network policies know of it;
	// and routes must name every replica on that port (checkRoutes).
	if resolvePort([]container{*p.ct}, portStr) == 0 {
		c.add(fmt.Errorf("%s: %w: --nats-cluster-listen port %s is not a container port", where, ErrPort, portStr))
		return
	}
	c.add(v.checkRoutes(where+" --nats-cluster-routes", splitList(p.value("nats-cluster-routes")), p.w, port)...)
}

// splitList splits a comma-separated flag value as the binary does, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
