package deploy

import "errors"

// Sentinel errors of the deployment checks. Every finding wraps exactly one of them with %w and
// names the file (and object) it is about, so that the mutation table can assert that a broken
// copy is caught for the intended reason, not by accident.
var (
	// ErrSyntax: a file does not parse (YAML, JSON, Dockerfile, NATS config).
	ErrSyntax = errors.New("syntax error")
	// ErrMissingField: a required field (apiVersion, kind, metadata.name, ...) is absent.
	ErrMissingField = errors.New("missing required field")
	// ErrKustomization: a kustomization does not list exactly the manifests beside it.
	ErrKustomization = errors.New("kustomization does not match its directory")
	// ErrDuplicateObject: two documents of one variant define the same object.
	ErrDuplicateObject = errors.New("object defined twice")
	// ErrNamespace: an object is outside its variant's namespace.
	ErrNamespace = errors.New("wrong namespace")
	// ErrFlag: a container argument does not parse with kvselect's real flag set.
	ErrFlag = errors.New("argument rejected by kvselect's flag set")
	// ErrEnv: an environment variable is read by nothing.
	ErrEnv = errors.New("environment variable not read by kvselect")
	// ErrUndefinedVar: an argument references $(VAR) that the container does not define first.
	ErrUndefinedVar = errors.New("undefined $(VAR) reference")
	// ErrRoute: a probe or scrape annotation names a route the HTTP API does not serve.
	ErrRoute = errors.New("route not served")
	// ErrProbe: readiness and liveness probes are not /ready and /health.
	ErrProbe = errors.New("wrong probe")
	// ErrPort: a port does not resolve to the container port it must reach.
	ErrPort = errors.New("port mismatch")
	// ErrReplicaID: two pods would announce the same replica id.
	ErrReplicaID = errors.New("replica ids not unique")
	// ErrPeers: replicas would not apply each other's lifecycle events.
	ErrPeers = errors.New("replica peers misconfigured")
	// ErrBus: replicas would not share one NATS bus.
	ErrBus = errors.New("replicas do not share a bus")
	// ErrDNS: a host name does not resolve to an object of the variant.
	ErrDNS = errors.New("host does not resolve")
	// ErrRoutes: NATS cluster routes do not reach every server of the cluster.
	ErrRoutes = errors.New("cluster routes incomplete")
	// ErrJetStream: the NATS configuration enables JetStream.
	ErrJetStream = errors.New("JetStream enabled")
	// ErrNATSConfig: the NATS configuration is rejected by nats-server.
	ErrNATSConfig = errors.New("invalid nats-server configuration")
	// ErrStatefulSet: a StatefulSet cannot bring its pods up (governing Service, pod management).
	ErrStatefulSet = errors.New("statefulset misconfigured")
	// ErrService: a Service selects no pods or a required Service is absent.
	ErrService = errors.New("service misconfigured")
	// ErrResources: resource requests or limits are absent or inconsistent.
	ErrResources = errors.New("resources misconfigured")
	// ErrSecurity: a container may run as root or escalate privileges.
	ErrSecurity = errors.New("security context misconfigured")
	// ErrMount: a file named by a flag or command is not mounted from an existing object.
	ErrMount = errors.New("file not mounted")
	// ErrPolicy: an AIBrix policy does not load.
	ErrPolicy = errors.New("AIBrix policy rejected")
	// ErrPDB: a replicated workload lacks a PodDisruptionBudget that allows a disruption.
	ErrPDB = errors.New("pod disruption budget misconfigured")
	// ErrImage: a container image or entrypoint is not the one the checks assume.
	ErrImage = errors.New("image misconfigured")
	// ErrDockerfile: the Dockerfile does not build the binary as required.
	ErrDockerfile = errors.New("dockerfile misconfigured")
	// ErrWorkers: the example worker registrations are not schedulable as documented.
	ErrWorkers = errors.New("example workers rejected")
	// ErrGateway: the example AIBrix gateway environment would be rejected or point elsewhere.
	ErrGateway = errors.New("gateway configuration rejected")
	// ErrSource: a Go source file the checks read does not have the expected shape.
	ErrSource = errors.New("unexpected Go source")
)
