// Package wstest provides an in-memory duplex transport for the replication connection
// layer, so state-machine tests run without sockets: each End is a ws.Transport; tests can
// hold back pongs, inject pongs of their choice, block writes to play a slow reader, and
// observe what was written and how the end was closed. It also holds what the tests of the
// connection and namespace layers share: frames on a test's end of a connection
// (SendFrame, RecvFrame, RecvClose, Hello), namespace ids, a small configuration and a
// random source for backoff.
package wstest

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"sync"

	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
)

// Pair returns two connected ends. Messages written on one are read on the other, in order.
// Each direction buffers up to capacity messages; a writer blocks when the buffer is full,
// as a socket whose peer stops reading does.
func Pair(capacity int) (a, b *End) {
	if capacity < 1 {
		capacity = 1
	}
	a = &End{msgs: make(chan []byte, capacity), changed: make(chan struct{}), autoPong: true, pending: map[string]chan struct{}{}}
	b = &End{msgs: make(chan []byte, capacity), changed: make(chan struct{}), autoPong: true, pending: map[string]chan struct{}{}}
	a.remote, b.remote = b, a
	a.closed, b.closed = make(chan struct{}), make(chan struct{})
	a.writeGate, b.writeGate = openGate(), openGate()
	return a, b
}

func openGate() chan struct{} {
	g := make(chan struct{})
	close(g)
	return g
}

// End is one end of a Pair. It implements ws.Transport, with the same concurrency contract;
// the test's methods may be called from any goroutine.
type End struct {
	remote *End
	msgs   chan []byte // messages written by the remote end, to be read here

	mu         sync.Mutex    // guards the fields below
	closed     chan struct{} // closed when this end is closed (locally or by the remote)
	closeErr   error         // what Read returns after close
	closeCode  protocol.CloseCode
	closedHere bool // Close was called on this end
	writeGate  chan struct{}
	written    [][]byte
	pingSeq    uint64
	pending    map[string]chan struct{} // outstanding pings by payload
	autoPong   bool
	pings      [][]byte // pings received while autoPong is off
	changed    chan struct{}
}

func (e *End) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Read implements ws.Transport.
func (e *End) Read(ctx context.Context, max int) ([]byte, error) {
	select {
	case m := <-e.msgs:
		if len(m) > max {
			return nil, &ws.MessageTooLargeError{Limit: max}
		}
		return m, nil
	case <-e.closed:
		// Drain what the remote wrote before closing, then report the close.
		select {
		case m := <-e.msgs:
			if len(m) > max {
				return nil, &ws.MessageTooLargeError{Limit: max}
			}
			return m, nil
		default:
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		return nil, e.closeErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write implements ws.Transport. It blocks while writes are blocked (BlockWrites) or the
// remote's buffer is full.
func (e *End) Write(ctx context.Context, msg []byte) error {
	e.mu.Lock()
	gate := e.writeGate
	e.mu.Unlock()
	select {
	case <-gate:
	case <-e.closed:
		return ws.ErrTransportClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	cp := append([]byte(nil), msg...)
	select {
	case <-e.closed:
		return ws.ErrTransportClosed
	default:
	}
	select {
	case e.remote.msgs <- cp:
	case <-e.closed:
		return ws.ErrTransportClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.written = append(e.written, cp)
	e.notify()
	e.mu.Unlock()
	return nil
}

// Ping implements ws.Transport with the protocol's ping payload (docs/protocol.md#liveness):
// an 8-byte big-endian counter. It returns nil only when a pong with exactly the outstanding
// payload arrives.
func (e *End) Ping(ctx context.Context) error {
	e.mu.Lock()
	e.pingSeq++
	payload := binary.BigEndian.AppendUint64(nil, e.pingSeq)
	ch := make(chan struct{}, 1)
	e.pending[string(payload)] = ch
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.pending, string(payload))
		e.mu.Unlock()
	}()
	e.remote.receivePing(payload)
	select {
	case <-ch:
		return nil
	case <-e.closed:
		return ws.ErrTransportClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// receivePing answers a ping with its exact payload, or keeps it for the test.
func (e *End) receivePing(payload []byte) {
	e.mu.Lock()
	auto := e.autoPong
	if !auto {
		e.pings = append(e.pings, payload)
		e.notify()
	}
	e.mu.Unlock()
	if auto {
		e.remote.receivePong(payload)
	}
}

// receivePong resolves the outstanding ping whose payload equals p; any other pong is
// ignored.
func (e *End) receivePong(p []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ch, ok := e.pending[string(p)]; ok {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// SetAutoPong turns automatic pong answers of this end on or off. Off, received pings are
// kept (Pings) and the test answers them with Pong.
func (e *End) SetAutoPong(on bool) {
	e.mu.Lock()
	e.autoPong = on
	e.mu.Unlock()
}

// Pings returns the ping payloads received while autoPong was off.
func (e *End) Pings() [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]byte(nil), e.pings...)
}

// Pong sends a pong with payload p to the remote end.
func (e *End) Pong(p []byte) { e.remote.receivePong(p) }

// Close implements ws.Transport: the remote's Read returns a *ws.CloseError with code.
func (e *End) Close(code protocol.CloseCode, reason string) error {
	e.mu.Lock()
	if e.closedHere || e.isClosed() {
		e.closedHere = true
		e.mu.Unlock()
		return nil
	}
	e.closedHere = true
	e.closeCode = code
	e.closeErr = ws.ErrTransportClosed
	close(e.closed)
	e.notify()
	e.mu.Unlock()
	e.remote.remoteClosed(code, reason)
	return nil
}

func (e *End) isClosed() bool {
	select {
	case <-e.closed:
		return true
	default:
		return false
	}
}

func (e *End) remoteClosed(code protocol.CloseCode, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() {
		return
	}
	e.closeErr = &ws.CloseError{Code: code, Reason: reason}
	close(e.closed)
	e.notify()
}

// Drop closes both ends without a close frame, as a lost connection: Reads fail with a
// plain error.
func (e *End) Drop() {
	for _, x := range []*End{e, e.remote} {
		x.mu.Lock()
		if !x.isClosed() {
			x.closeErr = errDropped
			close(x.closed)
			x.notify()
		}
		x.mu.Unlock()
	}
}

var errDropped = errors.New("wstest: connection dropped")

// BlockWrites makes this end's writes block until UnblockWrites, like a socket whose
// remote reads nothing.
func (e *End) BlockWrites() {
	e.mu.Lock()
	select {
	case <-e.writeGate:
		e.writeGate = make(chan struct{})
	default:
	}
	e.mu.Unlock()
}

// UnblockWrites releases blocked writes.
func (e *End) UnblockWrites() {
	e.mu.Lock()
	select {
	case <-e.writeGate:
	default:
		close(e.writeGate)
	}
	e.mu.Unlock()
}

// Send writes raw bytes to the remote as this end (a test playing the other side).
func (e *End) Send(msg []byte) error { return e.Write(context.Background(), msg) }

// Recv reads the next message sent by the remote, or fails when ctx ends or the end closes.
func (e *End) Recv(ctx context.Context) ([]byte, error) { return e.Read(ctx, 1<<30) }

// Written returns the messages this end has written, in order.
func (e *End) Written() [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]byte(nil), e.written...)
}

// Closed reports whether this end is closed, and the code it was closed with by Close on
// this end (0 if the remote closed it or it was dropped).
func (e *End) Closed() (bool, protocol.CloseCode) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.isClosed(), e.closeCode
}

// Done is closed when this end is closed.
func (e *End) Done() <-chan struct{} { return e.closed }

// Changed returns a channel closed at the next change of this end (a write, a ping kept,
// a close).
func (e *End) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// Dialer is a ws.Dialer over fake pairs. Each Dial takes the next scripted result: an error,
// or a fresh Pair whose far end is delivered on Accepted for the test to play the hub. Safe
// for concurrent use.
type Dialer struct {
	// Accepted receives the hub-side end of each successful dial, with the request header.
	Accepted chan Dialed

	mu     sync.Mutex // guards script, dials and urls
	script []error    // consumed in order; nil entries (or an empty script) mean success
	dials  int
	urls   []string
}

// Dialed is one successful fake dial.
type Dialed struct {
	End    *End
	Header http.Header
	URL    string
}

// NewDialer returns a dialer whose dials succeed unless scripted otherwise.
func NewDialer() *Dialer { return &Dialer{Accepted: make(chan Dialed, 64)} }

// Fail makes the next dials fail with errs, in order (nil: succeed).
func (d *Dialer) Fail(errs ...error) {
	d.mu.Lock()
	d.script = append(d.script, errs...)
	d.mu.Unlock()
}

// Dials returns the number of Dial calls so far.
func (d *Dialer) Dials() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials
}

// URLs returns the URL of every Dial call so far, in order.
func (d *Dialer) URLs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.urls...)
}

// Dial implements ws.Dialer.
func (d *Dialer) Dial(ctx context.Context, url string, header http.Header) (ws.Transport, error) {
	d.mu.Lock()
	d.dials++
	d.urls = append(d.urls, url)
	var err error
	if len(d.script) > 0 {
		err, d.script = d.script[0], d.script[1:]
	}
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	a, b := Pair(64)
	select {
	case d.Accepted <- Dialed{End: b, Header: header.Clone(), URL: url}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return a, nil
}
