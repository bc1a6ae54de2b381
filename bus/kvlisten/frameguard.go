package kvlisten

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// Why this file exists: go-zeromq allocates every frame at the size its header announces,
// before reading a byte of the body. One 9-byte header from a peer announcing 2^62 bytes panics
// the process (makeslice out of range) and 2^36 bytes reserves 64 GiB. The engines we dial are
// usually trusted, but an endpoint can be misregistered, a port reused, or a stream corrupted,
// and a selector must not die of it. libzmq's answer is ZMQ_MAXMSGSIZE; go-zeromq has none, so
// the private transport (transport.go) wraps each dialled connection in a frameGuard that parses
// the ZMTP 3 byte stream as go-zeromq reads it and fails the read that carries a header
// announcing more than the limit, before go-zeromq sees that header. go-zeromq then drops the
// connection, the receiver's Recv fails, and the listener redials with backoff (the reason is
// in State.LastError).

// ErrMessageTooLarge reports a ZMTP frame, or a multi-frame message, larger than
// Config.MaxMessageBytes. The connection that carried it is closed.
var ErrMessageTooLarge = errors.New("kvlisten: ZMTP message exceeds the size limit")

// zmtpGreetingLen is the length of a ZMTP 3 greeting (signature, version, mechanism, as-server,
// filler). It is not framed; everything after it is.
const zmtpGreetingLen = 64

// ZMTP frame flag bits (ZMTP 3, RFC 23 §2.3).
const (
	zmtpFlagMore    = 0x01
	zmtpFlagLong    = 0x02
	zmtpFlagCommand = 0x04
)

// zmtpParser states.
const (
	zpGreeting  = iota // inside the 64-byte greeting
	zpFlags            // expecting a frame's flags byte
	zpShortSize        // expecting the 1-byte size
	zpLongSize         // inside the 8-byte big-endian size
	zpBody             // inside a body
)

// zmtpParser follows a ZMTP 3 byte stream from its first byte, fed in arbitrary pieces, and
// checks the frames' announced sizes against max, summed over each run of frames joined by
// the MORE flag (one go-zeromq message). It never buffers the stream: it keeps only the position
// inside the current header or body. The zero value is not usable; see newZMTPParser.
type zmtpParser struct {
	max   uint64
	state uint8
	// left is what remains of the greeting (zpGreeting) or of the body (zpBody).
	left uint64
	// flags is the current frame's flags; size accumulates a long size, sizeN bytes of it.
	flags byte
	size  uint64
	sizeN int
	// msg is the announced size of the current message's frames so far.
	msg uint64
}

func newZMTPParser(max uint64) zmtpParser {
	return zmtpParser{max: max, state: zpGreeting, left: zmtpGreetingLen}
}

// feed advances over b. It returns ErrMessageTooLarge (wrapped) at the first header whose
// size breaks the limit; after an error the parser must not be fed again.
func (p *zmtpParser) feed(b []byte) error {
	for len(b) > 0 {
		switch p.state {
		case zpGreeting, zpBody:
			k := min(p.left, uint64(len(b)))
			p.left -= k
			b = b[k:]
			if p.left == 0 {
				p.state = zpFlags
			}
		case zpFlags:
			p.flags = b[0]
			b = b[1:]
			p.size, p.sizeN = 0, 0
			p.state = zpShortSize
			if p.flags&zmtpFlagLong != 0 {
				p.state = zpLongSize
			}
		case zpShortSize:
			p.size = uint64(b[0])
			b = b[1:]
			if err := p.frame(); err != nil {
				return err
			}
		case zpLongSize:
			for len(b) > 0 && p.sizeN < 8 {
				p.size = p.size<<8 | uint64(b[0])
				p.sizeN++
				b = b[1:]
			}
			if p.sizeN == 8 {
				if err := p.frame(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// frame checks the header just completed and moves to its body. Every frame counts toward
// the message it belongs to, command frames included: go-zeromq collects frames into one
// message for as long as their MORE flag is set, whatever their kind (ZMTP 3 never sets MORE
// on a command, so a well-behaved peer's commands are bounded one by one). Invariant: msg ≤ max.
func (p *zmtpParser) frame() error {
	used := p.msg
	if p.size > p.max-used {
		return fmt.Errorf("%w: frame of %d bytes after %d bytes of the same message (limit %d)",
			ErrMessageTooLarge, p.size, used, p.max)
	}
	p.msg = used + p.size
	if p.flags&zmtpFlagMore == 0 {
		p.msg = 0
	}
	p.left, p.state = p.size, zpBody
	if p.size == 0 {
		p.state = zpFlags
	}
	return nil
}

// frameGuard is a dialled connection whose reads pass through a zmtpParser. A read whose bytes
// break the limit returns the error instead of the bytes and closes the connection, so
// go-zeromq never receives the oversized header.
type frameGuard struct {
	net.Conn
	p   zmtpParser
	err error
}

// Read implements net.Conn. It is called only by the connection's go-zeromq reader goroutine
// (go-zeromq reads a connection from one goroutine), so the parser needs no lock.
func (g *frameGuard) Read(b []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.Conn.Read(b)
	if n > 0 {
		if perr := g.p.feed(b[:n]); perr != nil {
			g.err = perr
			_ = g.Conn.Close()
			return 0, perr
		}
	}
	return n, err
}

// maxMessageKey carries Config.MaxMessageBytes from dialSocket to the transport through the
// socket's context (go-zeromq's transport registry is global; the context is per socket).
type maxMessageKey struct{}

func withMaxMessage(ctx context.Context, max int) context.Context {
	return context.WithValue(ctx, maxMessageKey{}, max)
}

// guard wraps c in a frameGuard when ctx carries a limit.
func guard(ctx context.Context, c net.Conn) net.Conn {
	max, ok := ctx.Value(maxMessageKey{}).(int)
	if !ok || max <= 0 {
		return c
	}
	return &frameGuard{Conn: c, p: newZMTPParser(uint64(max))}
}
