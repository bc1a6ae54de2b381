package deploy

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Name resolution inside a variant: which pods a host name reaches, and on which container port.
// This is the part of Kubernetes DNS and Service routing the manifests rely on:
//
//   - <svc>[.<ns>[.svc[.cluster.local]]]: a Service. A ClusterIP Service maps its port to the
//     targetPort of the pods it selects; a headless Service resolves to the pod IPs, so the port
//     is used as is.
//   - <pod>.<svc>[.<ns>...]: one pod of the StatefulSet governed by the headless Service <svc>.
//     Such names are used before the pods are ready (NATS routes, registration of workers on each
//     replica), so the Service must publish not-ready addresses.
//
// A client in another namespace must spell the namespace.

// target is what a host:port reaches.
type target struct {
	w       *workload
	ordinal int  // the pod's ordinal for <pod>.<svc> names, -1 for a Service name
	port    int  // the container port reached
	direct  bool // reached through a headless Service: every pod, ready or not
}

// resolvePort resolves a port reference (a number or a port name) against the containers of a pod:
// the container port it designates, or 0 when no container declares it.
func resolvePort(cs []container, ref string) int {
	n, err := strconv.Atoi(ref)
	for _, c := range cs {
		for _, p := range c.Ports {
			if (err == nil && p.ContainerPort == n) || (err != nil && p.Name == ref) {
				return p.ContainerPort
			}
		}
	}
	return 0
}

// selected returns the workloads whose pod template labels sel selects.
func (v *variant) selected(sel map[string]string) []*workload {
	var out []*workload
	for _, w := range v.workloads {
		if selects(sel, w.spec.Template.Metadata.Labels) {
			out = append(out, w)
		}
	}
	return out
}

func (v *variant) service(name string) *service {
	for _, s := range v.services {
		if s.Metadata.Name == name {
			return s
		}
	}
	return nil
}

// resolve returns what host:port reaches from a client in namespace fromNS.
//
// Names are interpreted as Kubernetes DNS does for the search path of a pod in fromNS: a short
// name is looked up in fromNS only. Names of other namespaces than v's are not resolvable here
// (each variant is self-contained), which is reported as ErrDNS.
func (v *variant) resolve(host string, port int, fromNS string) ([]target, error) {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	// Strip the namespace suffix: .<ns>, .<ns>.svc or .<ns>.svc.cluster.local.
	for _, suffix := range [][]string{{v.namespace, "svc", "cluster", "local"}, {v.namespace, "svc"}, {v.namespace}} {
		if len(labels) > len(suffix) && slices.Equal(labels[len(labels)-len(suffix):], suffix) {
			labels = labels[:len(labels)-len(suffix)]
			fromNS = v.namespace
			break
		}
	}
	if fromNS != v.namespace {
		return nil, fmt.Errorf("%w: %s: not in namespace %s (a client in %s must name it)", ErrDNS, host, v.namespace, fromNS)
	}
	switch len(labels) {
	case 1:
		return v.resolveService(host, labels[0], port)
	case 2:
		return v.resolvePod(host, labels[0], labels[1], port)
	}
	return nil, fmt.Errorf("%w: %s: not a Service or pod name of %s", ErrDNS, host, v.dir)
}

// resolveService resolves a Service name: for a ClusterIP Service through its port list (port →
// targetPort → container port), for a headless one directly to the pods' container port.
func (v *variant) resolveService(host, name string, port int) ([]target, error) {
	s := v.service(name)
	if s == nil {
		return nil, fmt.Errorf("%w: %s: no Service %q in %s", ErrDNS, host, name, v.dir)
	}
	ws := v.selected(s.spec.Selector)
	if len(ws) == 0 {
		return nil, fmt.Errorf("%w: %s: Service %s selects no pods", ErrDNS, host, name)
	}
	ref := strconv.Itoa(port)
	if !s.spec.headless() {
		found := false
		for _, p := range s.spec.Ports {
			if p.Port == port {
				found = true
				if p.TargetPort != "" {
					ref = p.TargetPort
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: %s:%d: Service %s has no port %d", ErrPort, host, port, name, port)
		}
	}
	var out []target
	for _, w := range ws {
		cp := resolvePort(w.spec.Template.Spec.Containers, ref)
		if cp == 0 {
			return nil, fmt.Errorf("%w: %s:%d: %s declares no container port %s", ErrPort, host, port, w, ref)
		}
		out = append(out, target{w: w, ordinal: -1, port: cp, direct: s.spec.headless()})
	}
	return out, nil
}

// resolvePod resolves <pod>.<svc>: the governing Service must be headless and publish not-ready
// addresses (both kvselect and NATS use these names before their pods are ready), and pod must be
// one of the names the StatefulSet creates at its declared replica count.
func (v *variant) resolvePod(host, pod, svcName string, port int) ([]target, error) {
	s := v.service(svcName)
	if s == nil {
		return nil, fmt.Errorf("%w: %s: no Service %q in %s", ErrDNS, host, svcName, v.dir)
	}
	if !s.spec.headless() || !s.spec.PublishNotReadyAddresses {
		return nil, fmt.Errorf("%w: %s: per-pod names need Service %s headless with publishNotReadyAddresses", ErrDNS, host, svcName)
	}
	for _, w := range v.workloads {
		if w.Kind != "StatefulSet" || w.spec.ServiceName != svcName {
			continue
		}
		i := slices.Index(w.podNames(), pod)
		if i < 0 {
			continue
		}
		if resolvePort(w.spec.Template.Spec.Containers, strconv.Itoa(port)) == 0 {
			return nil, fmt.Errorf("%w: %s:%d: %s declares no container port %d", ErrPort, host, port, w, port)
		}
		return []target{{w: w, ordinal: i, port: port}}, nil
	}
	return nil, fmt.Errorf("%w: %s: no pod %q of a StatefulSet governed by %s", ErrDNS, host, pod, svcName)
}

// splitURL returns host and port of a URL such as nats://h:4222, http://h:8092/x or tcp://h:1;
// a URL without a port gets def.
func splitURL(raw string, def int) (host string, port int, path string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", 0, "", fmt.Errorf("%w: %q is not a URL with a host", ErrDNS, raw)
	}
	host, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return u.Host, def, u.Path, nil
	}
	port, err = strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, "", fmt.Errorf("%w: %q has a bad port", ErrPort, raw)
	}
	return host, port, u.Path, nil
}

// checkRoutes requires that a list of cluster route URLs names every pod of one StatefulSet on
// the route port the pods declare, so that any server can seed the cluster.
func (v *variant) checkRoutes(what string, routes []string, w *workload, routePort int) []error {
	if len(routes) == 0 {
		return []error{fmt.Errorf("%s: %w: no cluster routes", what, ErrRoutes)}
	}
	var errs []error
	covered := make([]bool, w.replicas())
	for _, r := range routes {
		host, port, _, err := splitURL(r, 0)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: route %s: %w", what, r, err))
			continue
		}
		ts, err := v.resolve(host, port, v.namespace)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: route %s: %w", what, r, err))
			continue
		}
		for _, t := range ts {
			if t.w != w || t.port != routePort || t.ordinal < 0 {
				errs = append(errs, fmt.Errorf("%s: %w: route %s reaches %s port %d, want a pod of %s on %d", what, ErrRoutes, r, t.w, t.port, w, routePort))
				continue
			}
			covered[t.ordinal] = true
		}
	}
	for i, ok := range covered {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %w: no route to %s", what, ErrRoutes, w.podNames()[i]))
		}
	}
	return errs
}

// checkServices requires every Service to select pods and every Service port to reach a declared
// container port, and every StatefulSet to be governed by a headless Service that selects it.
func (v *variant) checkServices() []error {
	var errs []error
	for _, s := range v.services {
		ws := v.selected(s.spec.Selector)
		if len(ws) == 0 {
			errs = append(errs, fmt.Errorf("%s: %w: selects no pods", s, ErrService))
		}
		for _, p := range s.spec.Ports {
			ref := p.TargetPort
			if ref == "" {
				ref = strconv.Itoa(p.Port)
			}
			for _, w := range ws {
				if resolvePort(w.spec.Template.Spec.Containers, ref) == 0 {
					errs = append(errs, fmt.Errorf("%s: %w: port %d targets %s, which %s does not declare", s, ErrPort, p.Port, ref, w))
				}
			}
		}
	}
	for _, w := range v.workloads {
		if w.Kind != "StatefulSet" {
			continue
		}
		s := v.service(w.spec.ServiceName)
		if s == nil || !s.spec.headless() || !selects(s.spec.Selector, w.spec.Template.Metadata.Labels) {
			errs = append(errs, fmt.Errorf("%s: %w: serviceName %q is not a headless Service selecting its pods", w, ErrStatefulSet, w.spec.ServiceName))
		}
		if !w.spec.Selector.matches(w.spec.Template.Metadata.Labels) {
			errs = append(errs, fmt.Errorf("%s: %w: selector does not match the pod template", w, ErrStatefulSet))
		}
	}
	return errs
}
