package deploy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository root as seen from this package's directory.
const repoRoot = ".."

// TestDeploy runs every check on the shipped files.
func TestDeploy(t *testing.T) {
	if err := checkTree(repoRoot, t.Setenv); err != nil {
		for _, e := range unjoin(err) {
			t.Error(e)
		}
	}
}

// unjoin flattens an errors.Join result for one-finding-per-line reporting.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// copyTree copies what the checks read (deploy/ and the Go sources) into a fresh root.
func copyTree(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	copyFile := func(rel string) {
		data, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range []string{flagsSource, routesSource, envSource, goModSource} {
		copyFile(rel)
	}
	extra, _ := filepath.Glob(filepath.Join(repoRoot, extraFlagSources))
	for _, p := range extra {
		rel, _ := filepath.Rel(repoRoot, p)
		copyFile(rel)
	}
	err := filepath.WalkDir(filepath.Join(repoRoot, "deploy"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err == nil {
			copyFile(rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// mutate replaces old by new in root/rel, requiring exactly one occurrence so that a mutation can
// never silently become a no-op when the files change.
func mutate(t *testing.T, root, rel, old, new string) {
	t.Helper()
	p := filepath.Join(root, rel)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), old); n != 1 {
		t.Fatalf("mutation target %q occurs %d times in %s, want 1", old, n, rel)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCopyIsClean guards the mutation table: an unmodified copy must pass, so each mutation's
// failure is caused by the mutation.
func TestCopyIsClean(t *testing.T) {
	if err := checkTree(copyTree(t), t.Setenv); err != nil {
		t.Fatalf("unmodified copy fails: %v", err)
	}
}

// TestDeployMutations breaks a copy of the tree in one place at a time and requires the checks to
// report it for the intended reason.
func TestDeployMutations(t *testing.T) {
	const (
		kv     = "deploy/kubernetes/kvselect.yaml"
		emb    = "deploy/kubernetes/embedded-cluster/kvselect.yaml"
		nats   = "deploy/kubernetes/nats.yaml"
		pol    = "deploy/kubernetes/aibrix-policy.yaml"
		kust   = "deploy/kubernetes/kustomization.yaml"
		docker = "deploy/Dockerfile"
		gw     = "deploy/" + exampleGateway
		wk     = "deploy/" + exampleWorkers
		expol  = "deploy/" + examplePolicy
	)
	// Each case names the file, an exact snippet (which must occur once), its replacement, and
	// the sentinel the checks must report. Grouped by what they break.
	cases := []struct {
		name           string
		file, old, new string
		want           error
	}{
		// Documents and kustomizations.
		// Kubectl apply fails on the whole file.
		{"yaml syntax", nats, "kind: ConfigMap\n", "kind: [ConfigMap\n", ErrSyntax},
		// The API server rejects the object.
		{"no apiVersion", pol, "apiVersion: v1\n", "", ErrMissingField},
		// The API server rejects the object.
		{"no metadata.name", nats, "metadata:\n  name: nats-config\n", "metadata:\n", ErrMissingField},
		// Apply -k would silently skip the NATS cluster.
		{"kustomization misses a file", kust, "  - nats.yaml\n", "", ErrKustomization},
		// Apply -k fails.
		{"kustomization names a missing file", kust, "  - nats.yaml\n", "  - nats.yaml\n  - extra.yaml\n", ErrKustomization},
		// The later definition silently replaces the earlier one.
		{"object defined twice", pol, "name: kvselect-aibrix-policy\n", "name: nats-config\n", ErrDuplicateObject},
		// Short DNS names stop resolving across namespaces.
		{"object outside the namespace", pol, "namespace: kvselect\n", "namespace: default\n", ErrNamespace},
		// Kubectl patch cannot interpret the document.
		{"example patch without kind", gw, "kind: Deployment\n", "", ErrMissingField},

		// kvselect arguments and environment against the real flag set.
		// The binary exits with a usage error: a crash loop.
		{"unknown flag", kv, "- --discover-peers\n", "- --discover-peer\n", ErrFlag},
		// The binary exits with a parse error: a crash loop.
		{"bad flag value", kv, "- --port=8092\n", "- --port=http\n", ErrFlag},
		// The binary rejects positional arguments.
		{"positional argument", kv, "- --discover-peers\n", "- --discover-peers\n            - serve\n", ErrFlag},
		// Code and manifests drift apart: the manifest must follow.
		{"flag removed from the binary", flagsSource, `"discover-peers"`, `"discover-replicas"`, ErrFlag},
		// A typo in a setting is silently ignored.
		{"unknown environment variable", kv, "name: KVSELECT_SELECTION_POLICY", "name: KVSELECT_POLICY", ErrEnv},
		// Kubernetes leaves $(VAR) literally in the argument.
		{"undefined $(VAR)", kv, "tcp://$(POD_NAME)", "tcp://$(POD)", ErrUndefinedVar},
		// The image has no shell; the container cannot start.
		{"command overrides the entrypoint", kv, "image: kvselect:latest\n", "image: kvselect:latest\n          command: [\"/bin/sh\"]\n", ErrImage},

		// Probes and metrics against the real routes.
		// 404: the replica never becomes ready.
		{"readiness on an unserved route", kv, "path: /ready\n", "path: /readyz\n", ErrRoute},
		// Code and manifests drift apart: liveness would kill every pod.
		{"route removed from the API", routesSource, `"/health"`, `"/healthz"`, ErrRoute},
		// A replica without workers would be restarted forever.
		{"liveness on /ready", kv, "path: /health\n", "path: /ready\n", ErrProbe},
		// Prometheus scrapes 404s and no metrics exist.
		{"scrape path unserved", kv, "prometheus.io/path: /metrics", "prometheus.io/path: /metric", ErrRoute},
		// Prometheus scrapes a closed port.
		{"scrape port is not --port", kv, `prometheus.io/port: "8092"`, `prometheus.io/port: "9090"`, ErrPort},
		// Probes and Services reach nothing.
		{"container port is not --port", kv, "containerPort: 8092\n", "containerPort: 8093\n", ErrPort},

		// Identity, peers and bus.
		// Replicas drop each other's events as their own echoes.
		{"replica id shared by all pods", kv, "tcp://$(POD_NAME).kvselect-peers:9092", "tcp://kvselect.kvselect-peers:9092", ErrReplicaID},
		// Replicas ignore each other's bookings.
		{"no peers", kv, "- --discover-peers\n", "", ErrPeers},
		// A peer that never speaks: the intended one is not a peer.
		{"peer is not a replica", kv, "- --discover-peers\n", "- --replica-sync-peers=tcp://kvselect-7.kvselect-peers:9092\n", ErrPeers},
		// The replica cannot reach the bus.
		{"nats-url names no Service", kv, "nats://nats:4222", "nats://nats-client:4222", ErrDNS},
		// The replica connects to a route port and fails.
		{"nats-url on the wrong port", kv, "nats://nats:4222", "nats://nats:6222", ErrPort},
		// Embedded flags are ignored when --nats-url is set.
		{"external and embedded bus together", kv, "- --cluster=kvselect\n", "- --cluster=kvselect\n            - --nats-cluster-listen=0.0.0.0:6222\n", ErrBus},
		// Each replica talks only to itself.
		{"embedded replicas on private buses", emb, "            - --nats-cluster-listen=0.0.0.0:6222\n", "", ErrBus},
		// No other pod can open a route.
		{"embedded cluster port on loopback", emb, "--nats-cluster-listen=0.0.0.0:6222", "--nats-cluster-listen=127.0.0.1:6222", ErrBus},
		// That replica cannot seed a restarted cluster.
		{"embedded routes miss a replica", emb, ",nats://kvselect-2.kvselect-peers:6222", "", ErrRoutes},
		// A route that never resolves.
		{"embedded route to a pod that does not exist", emb, "nats://kvselect-2.kvselect-peers:6222", "nats://kvselect-3.kvselect-peers:6222", ErrDNS},
		// Routes cannot resolve before readiness, which needs them.
		{"pod names need not-ready addresses", emb, "  publishNotReadyAddresses: true\n", "", ErrDNS},

		// NATS cluster.
		// Stateful servers without volumes, for no use.
		{"jetstream enabled", nats, "    http_port: 8222\n", "    http_port: 8222\n    jetstream: enabled\n", ErrJetStream},
		// Nats-server exits at startup.
		{"nats config rejected", nats, "    http_port: 8222\n", "    http_port: eighty\n", ErrNATSConfig},
		// That server cannot seed a restarted cluster.
		{"nats routes miss a server", nats, "        nats://nats-2.nats-headless:6222\n", "", ErrRoutes},
		// A route that never resolves.
		{"nats route to a missing server", nats, "nats://nats-2.nats-headless:6222", "nats://nats-3.nats-headless:6222", ErrDNS},
		// Cluster members must have distinct names.
		{"nats server names collide", nats, "server_name: $SERVER_NAME", "server_name: nats", ErrNATSConfig},
		// The bus runs an untested server.
		{"nats image is not the tested version", nats, "image: nats:2.15.3-alpine", "image: nats:2.10.0-alpine", ErrImage},
		// Nats-server starts without its cluster configuration.
		{"nats config not mounted", nats, "mountPath: /etc/nats-config\n", "mountPath: /etc/nats\n", ErrMount},

		// Services and workloads.
		// The Service forwards to a closed port.
		{"service targets an undeclared port", nats, "      targetPort: client\n---\napiVersion: apps/v1", "      targetPort: 4223\n---\napiVersion: apps/v1", ErrPort},
		// The API Service has no endpoints.
		{"service selects nothing", kv, "  type: ClusterIP\n  selector:\n    app.kubernetes.io/name: kvselect\n", "  type: ClusterIP\n  selector:\n    app.kubernetes.io/name: kvselect-api\n", ErrService},
		// Kvselect-1 would wait forever for kvselect-0 to be ready.
		{"ordered pod management", kv, "  podManagementPolicy: Parallel\n", "  podManagementPolicy: OrderedReady\n", ErrStatefulSet},
		// Pod DNS names do not exist.
		{"statefulset without governing service", nats, "serviceName: nats-headless", "serviceName: nats-peers", ErrStatefulSet},
		// Node maintenance stalls.
		{"pdb blocks every drain", kv, "  maxUnavailable: 1\n", "  minAvailable: 3\n", ErrPDB},
		// The selector may land on a saturated node.
		{"no cpu request", kv, "              cpu: \"2\"\n              memory: 1Gi\n            limits:", "              memory: 1Gi\n            limits:", ErrResources},
		// The API server rejects the pod.
		{"request above limit", nats, "              memory: 128Mi\n", "              memory: 512Mi\n", ErrResources},
		// The OOM killer acts before the garbage collector.
		{"GOMEMLIMIT above the limit", kv, "value: 900MiB", "value: 2GiB", ErrResources},
		// The container may run as root.
		{"runs as root", kv, "runAsNonRoot: true\n        runAsUser: 65532", "runAsNonRoot: false\n        runAsUser: 65532", ErrSecurity},
		// File ownership in the image no longer matches.
		{"runAsUser is not the image user", kv, "runAsUser: 65532", "runAsUser: 1000", ErrSecurity},
		// Setuid binaries could gain privileges.
		{"privilege escalation", nats, "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", ErrSecurity},
		// Kvselect exits: the policy file is missing.
		{"policy file not mounted", kv, "mountPath: /etc/kvselect/aibrix\n", "mountPath: /etc/kvselect/policy\n", ErrMount},
		// Kvselect exits: the policy file is missing.
		{"policy ConfigMap key missing", pol, "  policy.yaml: |\n", "  aibrix.yaml: |\n", ErrMount},
		// Kvselect exits: the policy does not load.
		{"invalid mounted policy", pol, "sessionTTL: 10m", "sessionTTL: ten minutes", ErrPolicy},

		// Dockerfile.
		// The image runs the wrong binary.
		{"dockerfile builds another command", docker, "./cmd/kvselect\n", "./cmd/kvselect-zone\n", ErrDockerfile},
		// A dynamically linked binary cannot run on distroless/static.
		{"dockerfile with cgo", docker, "ENV CGO_ENABLED=0\n", "", ErrDockerfile},
		// The image is built with an untested toolchain.
		{"dockerfile on another Go", docker, "FROM golang:1.26-bookworm", "FROM golang:1.24-bookworm", ErrDockerfile},
		// RunAsNonRoot cannot be verified for a named user.
		{"dockerfile runs as root", docker, "USER 65532:65532", "USER root", ErrDockerfile},
		// A larger attack surface than needed.
		{"dockerfile final stage has a shell", docker, "FROM gcr.io/distroless/static-debian12:nonroot", "FROM debian:bookworm", ErrDockerfile},
		// The container cannot start.
		{"dockerfile entrypoint elsewhere", docker, `ENTRYPOINT ["/kvselect"]`, `ENTRYPOINT ["/usr/bin/kvselect"]`, ErrDockerfile},

		// Examples.
		// An operator copying the example gets a startup failure.
		{"example policy invalid", expol, "weight: 1.5", "weight: -Inf", ErrPolicy},
		// The worker stays incomplete, never schedulable.
		{"worker misses a rank endpoint", wk, `"1": "tcp://vllm-1.vllm.llm.svc:5558"`, `"2": "tcp://vllm-1.vllm.llm.svc:5558"`, ErrWorkers},
		// A misspelt field would be ignored by lenient clients.
		{"worker with an unknown field", wk, `"worker_id": 2,`, `"worker_id": 2, "dp_size": 2,`, ErrWorkers},
		// The second registration replaces the first.
		{"workers share an id", wk, `"worker_id": 2,`, `"worker_id": 1,`, ErrWorkers},
		// The example no longer shows what it claims.
		{"worker without DP ranks", wk, "\"data_parallel_size\": 2,\n    \"kv_events_endpoints\": {\n      \"0\": \"tcp://vllm-1", "\"data_parallel_size\": 1,\n    \"kv_events_endpoints\": {\n      \"0\": \"tcp://vllm-1", ErrWorkers},
		// The gateway refuses this combination.
		{"gateway Authoritative with FailOpen", gw, "value: Advisory\n", "value: Authoritative\n", ErrGateway},
		// The gateway posts to a path kvselect answers with 404.
		{"gateway endpoint path", gw, "8092/v1alpha1/select", "8092/select", ErrGateway},
		// The gateway lives in aibrix-system: short names fail.
		{"gateway endpoint without namespace", gw, "http://kvselect.kvselect.svc:8092", "http://kvselect:8092", ErrDNS},
		// Decisions would go to unready replicas.
		{"gateway endpoint on a headless Service", gw, "http://kvselect.kvselect.svc:8092", "http://kvselect-peers.kvselect.svc:8092", ErrGateway},
		// The policy's rule on that label never matches.
		{"gateway misses a policy attribute", gw, ",routing.example.com/pool", "", ErrGateway},
		// The gateway refuses the list.
		{"gateway unknown metric", gw, "runningRequests,kvCacheUsage", "runningRequests,kvCache", ErrGateway},
		// The setting is silently ignored.
		{"gateway variable misspelt", gw, "AIBRIX_EXTERNAL_ROUTER_TIMEOUT", "AIBRIX_EXTERNAL_ROUTER_TIMEOUT_MS", ErrGateway},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t)
			mutate(t, root, tc.file, tc.old, tc.new)
			err := checkTree(root, t.Setenv)
			if !errors.Is(err, tc.want) {
				t.Fatalf("want an error wrapping %q, got: %v", tc.want, err)
			}
		})
	}
}
