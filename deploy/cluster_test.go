package deploy

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natsembed"
	"github.com/kvselect/kvselect/bus/natstest"
)

// The shipped cluster definitions, run for real on loopback: three nats-servers from the NATS
// StatefulSet's nats.conf, and three embedded servers started from the embedded-cluster replicas'
// flags the way cmd/kvselect starts them. Host names in routes are rewritten to 127.0.0.1 with a
// port per pod; everything else (cluster name, route list, JetStream off) is as shipped. Each
// cluster must carry a message from its last server to its first.

// freePorts reserves n loopback ports by binding and releasing them. Another process could take
// one in between; the servers would then fail to start and the test reports it.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for i := range ports {
		// All n stay bound until the end, so the kernel cannot hand the same port out twice.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// loopbackRoute rewrites a shipped route URL to the loopback port of the pod it names.
func loopbackRoute(t *testing.T, v *variant, route string, ports []int) string {
	t.Helper()
	host, port, _, err := splitURL(route, 0)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := v.resolve(host, port, v.namespace)
	if err != nil || len(ts) != 1 || ts[0].ordinal < 0 {
		t.Fatalf("route %s does not name one pod: %v", route, err)
	}
	return "nats-route://127.0.0.1:" + strconv.Itoa(ports[ts[0].ordinal])
}

// requireCarries subscribes on the first client URL and publishes on the last until the message
// arrives or the deadline passes (route and interest propagation are asynchronous).
func requireCarries(t *testing.T, first, last string) {
	t.Helper()
	requireCarriesAs(t, first, last, "kvselect.v1.deploy-test.lifecycle", "kvselect.v1.deploy-test.lifecycle")
}

// requireCarriesAs is requireCarries with a subscription pattern, a subject and client options
// (credentials for an authenticated cluster).
func requireCarriesAs(t *testing.T, first, last, pattern, subject string, opts ...nats.Option) {
	t.Helper()
	sub, err := nats.Connect(first, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub, err := nats.Connect(last, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	s, err := sub.SubscribeSync(pattern)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if err := pub.Publish(subject, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		if m, err := s.NextMsg(100 * time.Millisecond); err == nil && string(m.Data) == "ping" {
			return
		}
	}
	t.Fatal("the cluster did not carry a message from the last server to the first")
}

func mainVariant(t *testing.T, dir string) *variant {
	t.Helper()
	v, errs := loadVariant(filepath.Join(repoRoot, "deploy"), dir)
	if len(errs) > 0 || v == nil {
		t.Fatalf("loading %s: %v", dir, errs)
	}
	return v
}

// TestShippedNATSClusterForms starts the NATS StatefulSet's servers from the shipped nats.conf,
// each with its own pod's environment (SERVER_NAME), and requires them to form one cluster.
func TestShippedNATSClusterForms(t *testing.T) {
	v := mainVariant(t, "kubernetes")
	c := &checker{setenv: t.Setenv}
	var w *workload
	var ct *container
	for _, x := range v.workloads {
		if cs := x.spec.Template.Spec.Containers; len(cs) > 0 && imageRepo(cs[0].Image) == "nats" {
			w, ct = x, &x.spec.Template.Spec.Containers[0]
		}
	}
	if w == nil {
		t.Fatal("no NATS StatefulSet")
	}
	conf, _, err := v.fileContent(&w.spec.Template.Spec, ct, natsConfigPath(append(ct.Command, ct.Args...)))
	if err != nil {
		t.Fatal(err)
	}
	pods := w.podNames()
	ports := freePorts(t, len(pods))
	urls := make([]string, len(pods))
	for i, pod := range pods {
		env, _ := podEnv(ct, pod, v.namespace)
		opts, err := c.natsOptions(conf, env)
		if err != nil {
			t.Fatal(err)
		}
		if opts.ServerName != pod {
			t.Errorf("server_name = %q, want the pod name %q", opts.ServerName, pod)
		}
		// Loopback and random client ports; the monitoring port is not needed here.
		opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", ports[i]
		for j, r := range opts.Routes {
			u, err := url.Parse(loopbackRoute(t, v, r.String(), ports))
			if err != nil {
				t.Fatal(err)
			}
			opts.Routes[j] = u
		}
		opts.NoSigs, opts.NoLog = true, true
		if opts.PidFile != "" { // the pod's emptyDir; here a temporary directory
			opts.PidFile = filepath.Join(t.TempDir(), "nats.pid")
		}
		s := natstest.RunServerWithOptions(t, opts)
		if s.JetStreamEnabled() {
			t.Errorf("%s runs JetStream", pod)
		}
		urls[i] = s.ClientURL()
	}
	requireCarries(t, urls[0], urls[len(urls)-1])
}

// TestShippedEmbeddedClusterForms starts one embedded server per embedded-cluster replica, from
// that replica's parsed flags through natsembed.Start (the code path cmd/kvselect takes), and
// requires them to form one cluster.
func TestShippedEmbeddedClusterForms(t *testing.T) {
	src, err := readSources(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	v := mainVariant(t, "kubernetes/embedded-cluster")
	c := &checker{src: src, setenv: t.Setenv}
	w, ct := kvContainer(v)
	if w == nil {
		t.Fatal("no kvselect workload")
	}
	pods := w.podNames()
	ports := freePorts(t, len(pods))
	urls := make([]string, len(pods))
	// The auth file is a Secret made at install time; the test makes one the same way.
	authFile, err := bus.ParseAuthFile([]byte("secret: deploy-test-secret-0123456789abcdef0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	var auth *bus.AuthFile
	cluster := ""
	for i, pod := range pods {
		p, errs := c.parseKVPod(w, ct, pod, v.namespace)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		// As cmd/kvselect: without --nats-url, an embedded server, clustered when
		// --nats-cluster-listen is set.
		if p.value("nats-url") != "" || p.value("nats-cluster-listen") == "" {
			t.Fatalf("%s is not an embedded cluster member", pod)
		}
		var routes []string
		for _, r := range splitList(p.value("nats-cluster-routes")) {
			routes = append(routes, loopbackRoute(t, v, r, ports))
		}
		if p.value("nats-auth-file") != "" {
			auth, cluster = authFile, p.value("cluster")
		}
		e, err := natsembed.Start(natsembed.Options{
			ServerName:    pod,
			ListenAddr:    "127.0.0.1:0",
			ClusterName:   p.value("nats-cluster-name"),
			ClusterListen: fmt.Sprintf("127.0.0.1:%d", ports[i]),
			ClusterRoutes: routes,
			Auth:          auth,
			AuthCluster:   cluster,
		})
		if err != nil {
			t.Fatalf("%s: %v", pod, err)
		}
		t.Cleanup(func() { _ = e.Shutdown() })
		urls[i] = e.ClientURL()
	}
	if auth == nil {
		requireCarries(t, urls[0], urls[len(urls)-1])
		return
	}
	// With auth: a replica's credentials, its own v2 subject, over authenticated routes.
	subj, err := bus.NewSubjects(cluster)
	if err != nil {
		t.Fatal(err)
	}
	id := "tcp://deploy-test:9092"
	requireCarriesAs(t, urls[0], urls[len(urls)-1], subj.LifecycleAll(), subj.LifecycleFrom(id),
		nats.UserInfo(id, bus.ReplicaPassword(authFile.Secret, id)))
}
