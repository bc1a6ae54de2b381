package deploy

import (
	"fmt"
	"net"
	"strconv"
	"testing"
)

// The embedded NATS route port carries every bus message of the cluster between servers; a peer
// that reaches it (and has the route password) is a NATS server of the cluster. So the
// embedded-cluster variant must restrict it to the kvselect pods: some NetworkPolicy must select
// the pods, and no ingress rule that admits the route port may admit anything but kvselect pods.

// netpolSpec is the part of a networking.k8s.io/v1 NetworkPolicy spec the check reads.
type netpolSpec struct {
	PodSelector labelSelector `yaml:"podSelector"`
	PolicyTypes []string      `yaml:"policyTypes"`
	Ingress     []struct {
		From []struct {
			PodSelector       *labelSelector `yaml:"podSelector"`
			NamespaceSelector *labelSelector `yaml:"namespaceSelector"`
			IPBlock           *struct {
				CIDR string `yaml:"cidr"`
			} `yaml:"ipBlock"`
		} `yaml:"from"`
		Ports []struct {
			Port string `yaml:"port"`
		} `yaml:"ports"`
	} `yaml:"ingress"`
}

// routePortFindings returns what is wrong with the protection of the route port of the
// kvselect workload w (container port routePort) in v: only w's own pods may reach it.
func routePortFindings(v *variant, w *workload, routePort int) []error {
	return portFindings(v, w, routePort, w.spec.Template.Metadata.Labels)
}

// portFindings requires that some NetworkPolicy selects w's pods and that every ingress rule
// admitting container port routePort admits only pods labelled like from.
func portFindings(v *variant, w *workload, routePort int, from map[string]string) []error {
	labels := w.spec.Template.Metadata.Labels
	ct := w.spec.Template.Spec.Containers
	var errs []error
	covered := false
	for _, o := range v.objects {
		if o.Kind != "NetworkPolicy" {
			continue
		}
		var np netpolSpec
		if err := o.field("spec", &np); err != nil {
			errs = append(errs, err)
			continue
		}
		if !np.PodSelector.matches(labels) {
			continue
		}
		covered = true
		for i, rule := range np.Ingress {
			admitsRoute := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				admitsRoute = admitsRoute || resolvePort(ct, p.Port) == routePort
			}
			if !admitsRoute {
				continue
			}
			if len(rule.From) == 0 {
				errs = append(errs, fmt.Errorf("%s: ingress[%d] opens port %d to every address", o, i, routePort))
			}
			for _, f := range rule.From {
				if f.IPBlock != nil || f.NamespaceSelector != nil || f.PodSelector == nil || !f.PodSelector.matches(from) {
					errs = append(errs, fmt.Errorf("%s: ingress[%d] admits port %d from pods other than %v", o, i, routePort, from))
				}
			}
		}
	}
	if !covered {
		errs = append(errs, fmt.Errorf("%s: no NetworkPolicy selects the pods: port %d is open to every address", w, routePort))
	}
	return errs
}

func TestEmbeddedClusterRoutePortRestricted(t *testing.T) {
	v := mainVariant(t, "kubernetes/embedded-cluster")
	w, ct := kvContainer(v)
	if w == nil {
		t.Fatal("no kvselect workload")
	}
	src, err := readSources(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{src: src, setenv: t.Setenv}
	p, errs := c.parseKVPod(w, ct, w.podNames()[0], v.namespace)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	_, portStr, err := net.SplitHostPort(p.value("nats-cluster-listen"))
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)
	for _, e := range routePortFindings(v, w, port) {
		t.Error(e)
	}
	if p.value("nats-auth-file") == "" {
		t.Error("the embedded cluster runs without --nats-auth-file: any client reaching a server speaks for any replica")
	}

	// The check itself: without the policies it must complain.
	bare := *v
	bare.objects = nil
	for _, o := range v.objects {
		if o.Kind != "NetworkPolicy" {
			bare.objects = append(bare.objects, o)
		}
	}
	if len(routePortFindings(&bare, w, port)) == 0 {
		t.Fatal("the route-port check accepts a variant without NetworkPolicies")
	}
}

// TestNATSPortsRestricted: in the external-NATS variant, the NATS client port admits only the
// kvselect pods and the route port only the NATS pods.
func TestNATSPortsRestricted(t *testing.T) {
	v := mainVariant(t, "kubernetes")
	kv, _ := kvContainer(v)
	if kv == nil {
		t.Fatal("no kvselect workload")
	}
	var nw *workload
	for _, w := range v.workloads {
		if w.Metadata.Name == "nats" {
			nw = w
		}
	}
	if nw == nil {
		t.Fatal("no nats workload")
	}
	cs := nw.spec.Template.Spec.Containers
	client, cluster := resolvePort(cs, "client"), resolvePort(cs, "cluster")
	if client == 0 || cluster == 0 {
		t.Fatalf("nats ports client=%d cluster=%d", client, cluster)
	}
	for _, e := range portFindings(v, nw, client, kv.spec.Template.Metadata.Labels) {
		t.Error(e)
	}
	for _, e := range portFindings(v, nw, cluster, nw.spec.Template.Metadata.Labels) {
		t.Error(e)
	}
	// The check itself: admitting kvselect pods is a finding when another source is required.
	if len(portFindings(v, nw, client, map[string]string{"app.kubernetes.io/name": "someone-else"})) == 0 {
		t.Fatal("the port check accepts any source")
	}
}
