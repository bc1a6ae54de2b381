package deploy

// Operator-facing parts of the shipped manifests, against the real flags, routes and NATS
// configuration parser: NATS lame-duck shutdown (kvselect's drain is shutdown_test.go), the workers-file
// ConfigMap mount, the kvselect NetworkPolicy, and the Prometheus Operator ServiceMonitor.

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// lifecycleOf decodes the lifecycle and terminationGracePeriodSeconds the typed views skip.
type podExtras struct {
	Template struct {
		Spec struct {
			TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
			Containers                    []struct {
				Name      string `yaml:"name"`
				Lifecycle struct {
					PreStop *struct {
						Exec *struct {
							Command []string `yaml:"command"`
						} `yaml:"exec"`
					} `yaml:"preStop"`
				} `yaml:"lifecycle"`
			} `yaml:"containers"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

func extras(t *testing.T, w *workload) podExtras {
	t.Helper()
	var x podExtras
	if err := w.field("spec", &x); err != nil {
		t.Fatal(err)
	}
	return x
}

func grace(x podExtras) int {
	if g := x.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return 30 // Kubernetes' default
}

func TestShippedShutdownAndWorkersFile(t *testing.T) {
	src, err := readSources(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	v := mainVariant(t, "kubernetes")
	c := &checker{setenv: t.Setenv, src: src}
	sawKV, sawNATS := false, false
	for _, w := range v.workloads {
		ps := &w.spec.Template.Spec
		x := extras(t, w)
		for i := range ps.Containers {
			ct := &ps.Containers[i]
			pre := x.Template.Spec.Containers[i].Lifecycle.PreStop
			switch imageRepo(ct.Image) {
			case "kvselect":
				sawKV = true // its preStop and drain budget: shutdown_test.go
				var path string
				for _, a := range ct.Args {
					if v, ok := strings.CutPrefix(a, "--workers-file="); ok {
						path = v
					}
				}
				if _, ok := src.flags["workers-file"]; !ok || path == "" {
					t.Errorf("%s: kvselect does not read its catalog from --workers-file", w)
					continue
				}
				// The file must come from a ConfigMap mounted as a directory: a subPath mount
				// never sees ConfigMap updates.
				content, known, err := v.fileContent(ps, ct, path)
				if err != nil || !known {
					t.Errorf("%s: --workers-file %s: not shipped in a ConfigMap (%v)", w, path, err)
				}
				for _, m := range ct.VolumeMounts {
					if strings.HasPrefix(path, m.MountPath) && m.SubPath != "" {
						t.Errorf("%s: --workers-file is mounted with subPath %q; updates would never arrive", w, m.SubPath)
					}
				}
				if content == "" {
					t.Errorf("%s: the shipped workers file is empty", w)
				}
			case "nats":
				sawNATS = true
				conf, _, err := v.fileContent(ps, ct, natsConfigPath(append(ct.Command, ct.Args...)))
				if err != nil {
					t.Fatal(err)
				}
				env, _ := podEnv(ct, w.podNames()[0], v.namespace)
				opts, err := c.natsOptions(conf, env)
				if err != nil {
					t.Fatal(err)
				}
				want := []string{"nats-server", "--signal", "ldm=" + opts.PidFile}
				if opts.PidFile == "" || pre == nil || pre.Exec == nil || !slices.Equal(pre.Exec.Command, want) {
					t.Errorf("%s: NATS preStop must be %q (pid_file %q)", w, want, opts.PidFile)
				}
				if d := int((opts.LameDuckGracePeriod + opts.LameDuckDuration).Seconds()); d >= grace(x) {
					t.Errorf("%s: lame duck takes %d s, terminationGracePeriodSeconds is %d", w, d, grace(x))
				}
				// The pid file lives on a writable volume (the root filesystem is read-only).
				dir, writable := filepath.Dir(opts.PidFile), false
				for _, m := range ct.VolumeMounts {
					for _, vol := range ps.Volumes {
						if vol.Name == m.Name && m.MountPath == dir && vol.ConfigMap == nil {
							writable = true
						}
					}
				}
				if !writable {
					t.Errorf("%s: pid_file %s is not on a writable volume", w, opts.PidFile)
				}
			}
		}
	}
	if !sawKV || !sawNATS {
		t.Fatalf("kvselect %v, NATS %v: workloads not found", sawKV, sawNATS)
	}
}

// networkPolicy is the part of a NetworkPolicy the check reads.
type networkPolicy struct {
	PodSelector labelSelector `yaml:"podSelector"`
	PolicyTypes []string      `yaml:"policyTypes"`
	Ingress     []struct {
		Ports []struct {
			Protocol string `yaml:"protocol"`
			Port     any    `yaml:"port"`
		} `yaml:"ports"`
	} `yaml:"ingress"`
}

func TestShippedNetworkPolicy(t *testing.T) {
	v := mainVariant(t, "kubernetes")
	var kv *workload
	for _, w := range v.workloads {
		if imageRepo(w.spec.Template.Spec.Containers[0].Image) == "kvselect" {
			kv = w
		}
	}
	if kv == nil {
		t.Fatal("no kvselect workload")
	}
	port := 0
	for _, a := range kv.spec.Template.Spec.Containers[0].Args {
		if s, ok := strings.CutPrefix(a, "--port="); ok {
			port, _ = strconv.Atoi(s)
		}
	}
	found := false
	for _, o := range v.objects {
		if o.Kind != "NetworkPolicy" {
			continue
		}
		var np networkPolicy
		if err := o.field("spec", &np); err != nil {
			t.Fatal(err)
		}
		if !np.PodSelector.matches(kv.spec.Template.Metadata.Labels) {
			continue
		}
		found = true
		// The policy must let the API port in, or every client and probe-through-Service fails.
		allowed := false
		for _, in := range np.Ingress {
			for _, p := range in.Ports {
				ref := ""
				switch x := p.Port.(type) {
				case string:
					ref = x
				case int:
					ref = strconv.Itoa(x)
				}
				if resolvePort(kv.spec.Template.Spec.Containers, ref) == port {
					allowed = true
				}
			}
		}
		if !allowed {
			t.Errorf("%s: does not admit kvselect's --port %d", o, port)
		}
	}
	if !found {
		t.Error("no NetworkPolicy selects the kvselect pods")
	}
}

func TestShippedServiceMonitor(t *testing.T) {
	src, err := readSources(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	v := mainVariant(t, "kubernetes")
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy/monitoring/servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := decodeDocs(data, "monitoring/servicemonitor.yaml")
	if err != nil || len(docs) != 1 || docs[0].Kind != "ServiceMonitor" || docs[0].APIVersion != "monitoring.coreos.com/v1" {
		t.Fatalf("servicemonitor.yaml: %v %v", docs, err)
	}
	sm := docs[0]
	var spec struct {
		Selector  labelSelector `yaml:"selector"`
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
	}
	if err := sm.field("spec", &spec); err != nil {
		t.Fatal(err)
	}
	if sm.Metadata.Namespace != v.namespace {
		t.Errorf("ServiceMonitor in namespace %q, the Services are in %q", sm.Metadata.Namespace, v.namespace)
	}
	var picked []*service
	for _, s := range v.services {
		if spec.Selector.matches(s.Metadata.Labels) {
			picked = append(picked, s)
		}
	}
	// Scraping through the headless Service as well would scrape every pod twice.
	if len(picked) != 1 || picked[0].spec.headless() {
		t.Fatalf("ServiceMonitor selects %d Services; want exactly the ClusterIP kvselect Service", len(picked))
	}
	for _, ep := range spec.Endpoints {
		ok := false
		for _, p := range picked[0].spec.Ports {
			ok = ok || p.Name == ep.Port
		}
		if !ok {
			t.Errorf("endpoint port %q is not a port name of Service %s", ep.Port, picked[0].Metadata.Name)
		}
		if !src.routes["GET "+ep.Path] {
			t.Errorf("endpoint path %q is not a GET route of the API", ep.Path)
		}
	}
}
