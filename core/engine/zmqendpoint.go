package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// ValidateZMQEndpoint checks a ZeroMQ endpoint string the way Dynamo does before it connects or
// binds a socket (spec §10.7). It accepts ipc:// and inproc:// as-is, and tcp://host:port with a
// bracketed IPv6 host or the wildcard host "*". The error text matches Dynamo's:
// "invalid ZMQ endpoint `<ep>`: <reason>".
func ValidateZMQEndpoint(ep string) error {
	fail := func(reason string) error {
		return fmt.Errorf("invalid ZMQ endpoint `%s`: %s", ep, reason)
	}
	scheme, addr, ok := strings.Cut(ep, "://")
	if !ok || scheme == "" {
		return fail("missing scheme")
	}
	if addr == "" {
		return fail("missing address")
	}
	switch scheme {
	case "ipc", "inproc":
		return nil
	case "tcp":
	default:
		return fail(fmt.Sprintf("unsupported scheme `%s`", scheme))
	}
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return fail("missing TCP port")
	}
	host, port := addr[:i], addr[i+1:]
	if host == "" {
		return fail("missing TCP host")
	}
	if strings.HasPrefix(host, "[") {
		if !strings.HasSuffix(host, "]") {
			return fail("missing closing ]")
		}
	} else if strings.Contains(host, ":") {
		return fail("missing TCP port")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fail(fmt.Sprintf("invalid TCP port: %v", portErr(port, err)))
	}
	return nil
}

// portErr renders a port parse failure the way Rust's u16 parser words it, which is what
// Dynamo clients see.
func portErr(port string, err error) string {
	if port == "" {
		return "cannot parse integer from empty string"
	}
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return "number too large to fit in target type"
	}
	return "invalid digit found in string"
}
