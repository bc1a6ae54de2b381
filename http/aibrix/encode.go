package aibrix

import (
	"strconv"

	"github.com/kvselect/kvselect/internal/jsonw"
)

// The encoders below write compact JSON by hand: the documents are small and
// fixed in shape, and hand encoding keeps the member order, the omission of
// optional members and the absence of nulls explicit and allocation-free.

// AppendResponse appends the compact JSON encoding of r to dst.
//
// Member order: apiVersion, kind, metadata{requestId, decisionId?},
// status{decision, target{id, port}?, reason?}. Optional members are omitted
// when empty, never encoded as null. target is written only for Selected and
// always carries port.
func AppendResponse(dst []byte, r *Response) []byte {
	dst = append(dst, `{"apiVersion":"`+APIVersion+`","kind":"`+KindResponse+`","metadata":{"requestId":`...)
	dst = jsonw.AppendString(dst, r.RequestID)
	if r.DecisionID != "" {
		dst = append(dst, `,"decisionId":`...)
		dst = jsonw.AppendString(dst, r.DecisionID)
	}
	dst = append(dst, `},"status":{"decision":`...)
	dst = jsonw.AppendString(dst, string(r.Decision))
	if r.Decision == Selected {
		dst = append(dst, `,"target":{"id":`...)
		dst = jsonw.AppendString(dst, r.Target.ID)
		dst = append(dst, `,"port":`...)
		dst = strconv.AppendInt(dst, int64(r.Target.Port), 10)
		dst = append(dst, '}')
	}
	if r.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = jsonw.AppendString(dst, r.Reason)
	}
	return append(dst, "}}"...)
}

// AppendRequest appends r encoded the way the Gateway does: compact, member
// order apiVersion, kind, metadata, spec{model, policyMode, policyContext?,
// candidates[{id, ports, attributes?, metrics?}]}, optional members omitted.
// Candidates and attributes are written in the order held by r; callers
// that want the Gateway's sorted order sort first.
//
// It exists for the conformance checker, tests and benchmarks: the service
// itself only decodes requests. Floats use the shortest representation that
// round-trips ('g' format), as Go's encoder does.
func AppendRequest(dst []byte, r *Request) []byte {
	dst = append(dst, `{"apiVersion":"`+APIVersion+`","kind":"`+KindRequest+`","metadata":{"requestId":`...)
	dst = jsonw.AppendString(dst, r.RequestID)
	dst = append(dst, `},"spec":{"model":`...)
	dst = jsonw.AppendString(dst, r.Model)
	dst = append(dst, `,"policyMode":`...)
	dst = jsonw.AppendString(dst, string(r.PolicyMode))
	if len(r.PolicyContext) > 0 {
		dst = append(dst, `,"policyContext":{"attributes":`...)
		dst = appendAttributes(dst, r.PolicyContext)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"candidates":[`...)
	for i := range r.Candidates {
		c := &r.Candidates[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = jsonw.AppendString(dst, c.ID)
		dst = append(dst, `,"ports":[`...)
		for j, p := range c.Ports {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(p), 10)
		}
		dst = append(dst, ']')
		if len(c.Attributes) > 0 {
			dst = append(dst, `,"attributes":`...)
			dst = appendAttributes(dst, c.Attributes)
		}
		m := &c.Metrics
		if m.HasRunningRequests || m.HasEngineUtilization || m.HasKVCacheUsage {
			dst = append(dst, `,"metrics":{`...)
			sep := false
			if m.HasRunningRequests {
				dst = append(dst, `"runningRequests":`...)
				dst = strconv.AppendInt(dst, m.RunningRequests, 10)
				sep = true
			}
			if m.HasEngineUtilization {
				if sep {
					dst = append(dst, ',')
				}
				dst = append(dst, `"engineUtilization":`...)
				dst = strconv.AppendFloat(dst, m.EngineUtilization, 'g', -1, 64)
				sep = true
			}
			if m.HasKVCacheUsage {
				if sep {
					dst = append(dst, ',')
				}
				dst = append(dst, `"kvCacheUsage":`...)
				dst = strconv.AppendFloat(dst, m.KVCacheUsage, 'g', -1, 64)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}}"...)
}

func appendAttributes(dst []byte, a Attributes) []byte {
	dst = append(dst, '{')
	for i := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonw.AppendString(dst, a[i].Name)
		dst = append(dst, ':')
		dst = jsonw.AppendString(dst, a[i].Value)
	}
	return append(dst, '}')
}
