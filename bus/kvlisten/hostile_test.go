package kvlisten

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
)

// zmtpGreeting is a ZMTP 3.0 greeting for the NULL mechanism, as-server unset.
func zmtpGreeting() []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	return g
}

// zmtpReady is a READY command announcing socket type typ.
func zmtpReady(typ string) []byte {
	body := []byte{5}
	body = append(body, "READY"...)
	body = append(body, byte(len("Socket-Type")))
	body = append(body, "Socket-Type"...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(typ)))
	body = append(body, typ...)
	return append([]byte{0x04, byte(len(body))}, body...)
}

// readFrame reads one ZMTP frame and returns its flags and body.
func readFrame(r io.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	size := uint64(h[1])
	if h[0]&0x02 != 0 {
		var l [8]byte
		l[0] = h[1]
		if _, err := io.ReadFull(r, l[1:]); err != nil {
			return 0, nil, err
		}
		size = binary.BigEndian.Uint64(l[:])
	}
	body := make([]byte, size)
	_, err := io.ReadFull(r, body)
	return h[0], body, err
}

// hostilePub is a hand-written ZMTP PUB peer: it completes the handshake, waits for the
// subscription, then sends send. It returns the endpoint and the number of connections
// that reached the point of sending.
func hostilePub(t *testing.T, send []byte) (string, func() int64) {
	t.Helper()
	var sent atomic.Int64
	ep := serveTCP(t, func(c net.Conn) {
		if _, err := c.Write(append(zmtpGreeting(), zmtpReady("PUB")...)); err != nil {
			return
		}
		peer := make([]byte, 64)
		if _, err := io.ReadFull(c, peer); err != nil {
			return
		}
		for { // the peer's READY, then its subscription message
			flags, _, err := readFrame(c)
			if err != nil {
				return
			}
			if flags&0x04 == 0 {
				break
			}
		}
		if _, err := c.Write(send); err == nil {
			sent.Add(1)
		}
		_, _ = io.Copy(io.Discard, c)
	})
	return ep, sent.Load
}

// TestOversizedFrameRejected proves that a publisher announcing a frame larger than
// Config.MaxFrameBytes cannot make go-zeromq allocate it (an announced 2^62 bytes would
// panic the process; 2^36 would reserve 64 GiB): the connection is dropped, the reason is
// reported, and the listener keeps redialling.
func TestOversizedFrameRejected(t *testing.T) {
	for _, size := range []uint64{1 << 62, 1 << 36, 1<<20 + 1} {
		hdr := binary.BigEndian.AppendUint64([]byte{0x02}, size) // a long, final message frame
		ep, sent := hostilePub(t, hdr)
		l := startListener(t, Config{Endpoint: ep, Handler: &recHandler{}, MaxMessageBytes: 1 << 20,
			MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		poll.True(t, wait, "two connections refused", func() bool { return sent() >= 2 })
		poll.True(t, wait, "reason reported", func() bool {
			return strings.Contains(l.State().LastError, "exceeds")
		})
	}
}
