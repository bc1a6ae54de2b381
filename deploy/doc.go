// Package deploy holds kvselect's deployment material and the tests that keep it honest. It has no
// Go API: the package exists so that `go test ./deploy/` checks the files below against the code
// they configure.
//
// Contents:
//
//   - Dockerfile: multi-stage build of ./cmd/kvselect into a static binary on distroless, run as a
//     numeric non-root user (Dockerfile.dockerignore filters the build context).
//   - kubernetes/: a 3-node core-NATS cluster (ConfigMap, headless and client Services,
//     StatefulSet, PodDisruptionBudget) and 3 kvselect replicas on it (StatefulSet with stable
//     replica ids, headless peer Service, ClusterIP API Service on 8092, PodDisruptionBudget,
//     optional AIBrix policy ConfigMap). kustomization.yaml lists them.
//   - kubernetes/embedded-cluster/: the same replicas forming their own NATS cluster with embedded
//     servers (--nats-listen, --nats-cluster-listen, --nats-cluster-routes), no separate NATS.
//   - examples/: an AIBrix operator policy, the POST /workers bodies of a 2-worker vLLM fleet with
//     data-parallel ranks, and the AIBrix gateway environment that points at kvselect.
//
// What the tests guarantee (deploy_test.go runs every check on the real tree, and again on copies
// broken on purpose, each of which must be caught):
//
//   - every YAML document parses and has apiVersion, kind and metadata.name; each kustomization
//     lists exactly the manifests beside it; no object is defined twice; one namespace per variant;
//   - every argument of a kvselect container parses with a flag set rebuilt from
//     cmd/kvselect/flags.go (read with go/parser, never imported), after Kubernetes' $(VAR)
//     expansion, and every environment variable is one the code reads (DYN_ROUTER_*,
//     KVSELECT_SELECTION_POLICY), a Go runtime variable, or one the arguments expand;
//   - probes and Prometheus annotations name routes http/api/server.go registers, on kvselect's
//     --port; readiness is /ready and liveness /health;
//   - replica ids are unique across the pods a workload creates, peers name real replicas, and
//     replicas share one bus (an external NATS or an embedded cluster, never both, never neither);
//   - Service ports, probe ports and URLs in flags and configs resolve to declared container ports;
//     per-pod DNS names go through a headless Service that publishes not-ready pods;
//   - the NATS configuration loads in the nats-server version of go.mod, has no JetStream, and
//     routes to every server of its StatefulSet; the NATS image runs that same version;
//   - files named by flags are mounted, and mounted AIBrix policies load with the binary's loader;
//   - resources, security context and PodDisruptionBudgets are consistent;
//   - the Dockerfile builds ./cmd/kvselect with CGO off on the go.mod Go version, and its numeric
//     USER is the pods' runAsUser;
//   - the examples load: the policy with the AIBrix loader, the worker bodies through a real
//     HTTP API (each becomes schedulable), the gateway settings by AIBrix's configuration rules.
//
// A separate test starts three real nats-servers from the shipped nats.conf (hosts rewritten to
// loopback) and requires them to form a cluster that carries messages end to end.
package deploy
