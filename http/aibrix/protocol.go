package aibrix

// Wire constants of routing.aibrix.ai/v1alpha1.
const (
	// MediaType is the exact media type of requests and decisions. Responses
	// always carry this string verbatim.
	MediaType = "application/vnd.aibrix.external-routing+json;version=v1alpha1"
	// mediaTypeBase and mediaTypeVersion are MediaType split the way
	// mime.ParseMediaType reports it.
	mediaTypeBase    = "application/vnd.aibrix.external-routing+json"
	mediaTypeVersion = "v1alpha1"
	// ProblemMediaType is the media type of RFC 9457 error bodies.
	ProblemMediaType = "application/problem+json"

	// APIVersion is the fixed apiVersion of both documents.
	APIVersion = "routing.aibrix.ai/v1alpha1"
	// KindRequest and KindResponse are the fixed kinds.
	KindRequest  = "ReplicaSelectionRequest"
	KindResponse = "ReplicaSelectionResponse"

	// DefaultPath is the operation path of the OpenAPI contract.
	DefaultPath = "/v1alpha1/select"
	// DefaultMaxRequestBytes is the Gateway's default request cap (256 KiB).
	DefaultMaxRequestBytes = 256 << 10
	// MaxResponseBytes is the Gateway's default response cap (64 KiB).
	MaxResponseBytes = 64 << 10

	// MaxIDBytes bounds requestId, decisionId and reason (UTF-8 bytes) and
	// candidate ids.
	MaxIDBytes = 256
	// MaxAttributes bounds the members of one attributes object.
	MaxAttributes = 32
	// MaxAttributeValueLen bounds an attribute value (Unicode code points,
	// the JSON Schema maxLength reading).
	MaxAttributeValueLen = 256
	// MaxAttributeNameLen bounds an attribute name (1 letter + up to 127).
	MaxAttributeNameLen = 128
)

// PolicyMode is spec.policyMode.
type PolicyMode string

// The two policy modes.
const (
	Advisory      PolicyMode = "Advisory"
	Authoritative PolicyMode = "Authoritative"
)

// DecisionType is status.decision.
type DecisionType string

// The three decisions. Advisory allows Selected and NoDecision;
// Authoritative allows Selected and Denied.
const (
	Selected   DecisionType = "Selected"
	NoDecision DecisionType = "NoDecision"
	Denied     DecisionType = "Denied"
)

// Legal reports whether d may answer a request in mode m. This is the
// single definition of legality used by Evaluate, the handler tests and the
// conformance checker; an illegal decision makes the Gateway treat the
// exchange as a protocol failure (503 under FailClosed).
func (d DecisionType) Legal(m PolicyMode) bool {
	switch d {
	case Selected:
		return m == Advisory || m == Authoritative
	case NoDecision:
		return m == Advisory
	case Denied:
		return m == Authoritative
	}
	return false
}

// Request is a validated ReplicaSelectionRequest. Values produced by
// [DecodeRequest] satisfy every schema rule of the contract:
//
//   - RequestID is 1..256 UTF-8 bytes; Model is non-empty;
//   - Candidates is non-empty, ids are unique and of the form ns/name;
//   - each candidate's Ports is non-empty, unique, within 1..65535 and sorted
//     ascending (DecodeRequest sorts; the wire order is not trusted);
//   - attribute names match the contract's pattern, values are within limits.
//
// Candidate order is the wire order; it carries no preference.
// A Request is owned by whoever decoded it and is not mutated afterwards.
type Request struct {
	RequestID     string
	Model         string
	PolicyMode    PolicyMode
	PolicyContext Attributes // nil when spec.policyContext(.attributes) is absent
	Candidates    []Candidate
}

// Candidate is one spec.candidates[] entry.
type Candidate struct {
	ID         string
	Ports      []int // sorted ascending, unique, 1..65535
	Attributes Attributes
	Metrics    Metrics
}

// Attribute is one name/value pair of an attributes object.
type Attribute struct {
	Name, Value string
}

// Attributes is an attributes object in wire order. Names are unique.
// It is a slice rather than a map because objects hold at most 32 members
// and most requests carry a handful, so a scan beats hashing and allocating.
type Attributes []Attribute

// Lookup returns the value of name.
func (a Attributes) Lookup(name string) (string, bool) {
	for i := range a {
		if a[i].Name == name {
			return a[i].Value, true
		}
	}
	return "", false
}

// Metrics holds the optional observational metrics. A Has* flag is false
// when the member was omitted; the value is then zero and must be ignored.
type Metrics struct {
	RunningRequests      int64
	EngineUtilization    float64
	KVCacheUsage         float64
	HasRunningRequests   bool
	HasEngineUtilization bool
	HasKVCacheUsage      bool
}

// Target is status.target of a Selected decision. The service always
// emits Port even when the candidate advertised a single port.
type Target struct {
	ID   string
	Port int
}

// Response is a ReplicaSelectionResponse ready to encode. Invariant kept by
// the encoder's callers: Target is meaningful iff Decision == Selected;
// DecisionID and Reason are omitted from the wire when empty.
type Response struct {
	RequestID  string
	DecisionID string
	Decision   DecisionType
	Target     Target
	Reason     string
}
