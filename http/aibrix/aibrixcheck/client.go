package aibrixcheck

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kvselect/kvselect/http/aibrix"
)

// DefaultTimeout is the Gateway's default deadline for one exchange.
const DefaultTimeout = 10 * time.Millisecond

// Client performs exchanges the way the AIBrix Gateway does: POST to the
// configured URL verbatim, protocol media type in Content-Type and Accept,
// X-Request-Id, optional bearer token, no compression, no redirects, no
// retries, and one deadline covering dial, write, headers and body read.
// A Client is safe for concurrent use.
type Client struct {
	URL     string
	Token   string        // sent as "Authorization: Bearer <Token>" when non-empty
	Timeout time.Duration // per exchange; DefaultTimeout when 0
	HTTP    *http.Client
}

// NewClient returns a Client with a Gateway-like transport: a clone of the
// default transport (so proxy settings apply as they do to the Gateway),
// compression disabled (no Accept-Encoding is sent and nothing is
// transparently gunzipped), connection limits at the Gateway's default
// in-flight bound of 256, keep-alives on, and redirects returned as-is so
// a 3xx fails the 200 rule instead of being followed.
func NewClient(url, token string, timeout time.Duration) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = 256, 256, 256
	return &Client{URL: url, Token: token, Timeout: timeout, HTTP: &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

// EncodeRequest encodes req as the Gateway would send it: candidates sorted
// by id, ports sorted, attributes sorted by name, compact JSON. req itself
// is not modified.
func EncodeRequest(req *aibrix.Request) []byte {
	c := *req
	c.Candidates = slices.Clone(req.Candidates)
	slices.SortFunc(c.Candidates, func(a, b aibrix.Candidate) int { return strings.Compare(a.ID, b.ID) })
	for i := range c.Candidates {
		c.Candidates[i].Ports = slices.Clone(c.Candidates[i].Ports)
		slices.Sort(c.Candidates[i].Ports)
		c.Candidates[i].Attributes = sortedAttrs(c.Candidates[i].Attributes)
	}
	c.PolicyContext = sortedAttrs(req.PolicyContext)
	return aibrix.AppendRequest(nil, &c)
}

func sortedAttrs(a aibrix.Attributes) aibrix.Attributes {
	if a == nil {
		return nil
	}
	out := slices.Clone(a)
	slices.SortFunc(out, func(x, y aibrix.Attribute) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Do performs one exchange. hdr holds the Gateway headers to send (see
// [GatewayHeaders]); a nil body sends no body. Transport failures are
// reported in Exchange.Err, never as a Go error.
func (c *Client) Do(ctx context.Context, method string, body []byte, hdr http.Header) *Exchange {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// One context deadline covers dial, write, response headers and the
	// body read below, as in the Gateway; the checker reports a late body
	// as a deadline failure (the Gateway would classify it as a transport
	// error, but both are failed exchanges).
	ex := &Exchange{Deadline: timeout}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL, rd)
	if err != nil {
		ex.Err = err
		return ex
	}
	req.Header = hdr.Clone()
	start := time.Now()
	resp, err := c.HTTP.Do(req)
	if err != nil {
		ex.Elapsed = time.Since(start)
		ex.Err, ex.TimedOut = err, errors.Is(ctx.Err(), context.DeadlineExceeded)
		return ex
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, aibrix.MaxResponseBytes+1))
	ex.Elapsed = time.Since(start)
	if err != nil {
		ex.Err, ex.TimedOut = err, errors.Is(ctx.Err(), context.DeadlineExceeded)
		return ex
	}
	ex.Status, ex.Header = resp.StatusCode, resp.Header
	ex.Body, ex.Truncated = b, len(b) > aibrix.MaxResponseBytes
	return ex
}

// GatewayHeaders returns the headers the Gateway sends for requestID.
func (c *Client) GatewayHeaders(requestID string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", aibrix.MediaType)
	h.Set("Accept", aibrix.MediaType)
	h.Set("X-Request-Id", requestID)
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
	}
	return h
}
