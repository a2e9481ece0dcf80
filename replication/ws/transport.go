package ws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/replication/protocol"
)

// Transport is one established WebSocket as the connection layer uses it: whole binary
// messages, each carrying exactly one frame (docs/protocol.md#terms-and-invariants),
// WebSocket ping/pong for liveness, and a close with a code.
//
// Read is called by one goroutine only (the connection's reader); Write by one goroutine
// only (its writer); Ping and Close may be called from any goroutine, concurrently with Read
// and Write. Incoming pings must be answered by the transport with their exact payload.
type Transport interface {
	// Read returns the next binary message. A message longer than max bytes is not read
	// into memory: Read returns a *MessageTooLargeError. A text message is
	// ErrTextMessage. After the remote closed, Read returns a *CloseError with its code.
	Read(ctx context.Context, max int) ([]byte, error)
	// Write writes one binary message. It returns once the message is handed to the
	// socket.
	Write(ctx context.Context, msg []byte) error
	// Ping sends a ping and returns nil only when a pong echoing that ping's exact payload
	// arrives; late, empty, duplicate and unsolicited pongs do not count. It returns an
	// error when ctx ends first or the transport closes.
	Ping(ctx context.Context) error
	// Close sends a close frame with code and reason (best effort, bounded in time) and
	// releases the socket. It is idempotent; later calls return nil.
	Close(code protocol.CloseCode, reason string) error
}

// CloseError is what Read returns after the remote endpoint closed the WebSocket with a
// close frame.
type CloseError struct {
	Code   protocol.CloseCode
	Reason string // the remote's reason text: local diagnostics only, never in events
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("websocket closed by the remote endpoint: %d %v", uint16(e.Code), e.Code)
}

// RemoteCloseCode returns the close code carried by err if the remote closed the WebSocket.
func RemoteCloseCode(err error) (protocol.CloseCode, bool) {
	var ce *CloseError
	if errors.As(err, &ce) {
		return ce.Code, true
	}
	return 0, false
}

// MessageTooLargeError is what Read returns for a message over its limit (maxFrameBytes,
// FRAME_TOO_LARGE). The rest of the message is not read.
type MessageTooLargeError struct{ Limit int }

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("websocket message over %d bytes", e.Limit)
}

// ErrTextMessage is returned by Read for a text message: the protocol uses binary messages
// only.
var ErrTextMessage = errors.New("ws: text message on a binary-only connection")

// ErrTransportClosed is returned by Read, Write and Ping of a transport closed locally.
var ErrTransportClosed = net.ErrClosed

// batchTransport is a Transport that can batch writes: after BeginBatch, Write may hold
// messages until Flush writes everything held in one go. The writer uses it to turn the
// frames that are ready into one write(2). Messages the transport writes by itself (pongs,
// pings, the close frame) during a batch leave with that batch's Flush.
type batchTransport interface {
	Transport
	BeginBatch()
	// Flush writes what is held and ends the batch; when ctx ends first the transport is
	// closed.
	Flush(ctx context.Context) error
}

// wsTransport adapts a coder/websocket Conn.
type wsTransport struct {
	c            *websocket.Conn
	cork         *corkConn // the socket under c, when it can be corked; nil otherwise
	closeTimeout time.Duration

	// Each context given to Write or Flush closes the transport when it ends (as
	// coder/websocket does for the context of each call), watched once rather than per
	// message or batch: coder/websocket arms a timer per call for a context that can end.
	// Write and Flush are called by the writer only. Read's context is checked when Read is called; a Read in progress
	// ends when the transport closes (the connection cancels its read and write contexts
	// together, and the write context's end closes the transport).
	writeCtx context.Context
}

// NewWebSocketTransport adapts an established coder/websocket connection. closeTimeout bounds
// Close's close handshake; after it the socket is dropped without one. The library answers
// incoming pings with their payload, and its Conn.Ping matches a pong to the outstanding ping
// by exact payload (a decimal counter; see docs/decisions.md).
func NewWebSocketTransport(c *websocket.Conn, closeTimeout time.Duration) Transport {
	return newWSTransport(c, nil, closeTimeout)
}

func newWSTransport(c *websocket.Conn, cork *corkConn, closeTimeout time.Duration) *wsTransport {
	c.SetReadLimit(-1) // Read enforces the frame limit itself, without buffering the excess
	return &wsTransport{c: c, cork: cork, closeTimeout: closeTimeout}
}

// watch makes the end of ctx close the transport, once per distinct context.
func (t *wsTransport) watch(ctx context.Context, last *context.Context) {
	if ctx == *last || ctx.Done() == nil {
		return
	}
	*last = ctx
	context.AfterFunc(ctx, func() { _ = t.c.CloseNow() })
}

// readBufPool holds the scratch buffers messages are read into before they are copied out
// at their exact size: one allocation per message, none for growing, and no buffer held by
// an idle connection.
var readBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// readBufKeep is the largest scratch buffer returned to the pool.
const readBufKeep = 64 << 10

func (t *wsTransport) Read(ctx context.Context, max int) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	typ, r, err := t.c.Reader(context.Background())
	if err != nil {
		return nil, t.mapErr(ctx, err)
	}
	// Read at most max+1 bytes: one more than allowed proves the message too large
	// without reading (or allocating for) the rest. The buffer grows with the bytes that
	// actually arrive, never from a declared length.
	bp := readBufPool.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() {
		if cap(buf) <= readBufKeep {
			*bp = buf[:0]
			readBufPool.Put(bp)
		}
	}()
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), max+1-len(buf)))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), max+1)])
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			return nil, &MessageTooLargeError{Limit: max}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, t.mapErr(ctx, err)
		}
	}
	if typ != websocket.MessageBinary {
		return nil, ErrTextMessage
	}
	return bytes.Clone(buf), nil
}

func (t *wsTransport) mapErr(ctx context.Context, err error) error {
	if code := websocket.CloseStatus(err); code != -1 {
		var ce websocket.CloseError
		errors.As(err, &ce)
		return &CloseError{Code: protocol.CloseCode(code), Reason: ce.Reason}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (t *wsTransport) Write(ctx context.Context, msg []byte) error {
	t.watch(ctx, &t.writeCtx)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.c.Write(context.Background(), websocket.MessageBinary, msg); err != nil {
		return t.mapErr(ctx, err)
	}
	return nil
}

// socketBytes counts the bytes read from and written to the socket, when it is corkable.
func (t *wsTransport) socketBytes() int64 {
	if t.cork == nil {
		return 0
	}
	return t.cork.moved.Load()
}

// ackedBytes counts the bytes written to the socket that the remote's TCP has acknowledged,
// when the socket is corkable and the system tells (see corkConn.ackedBytes).
func (t *wsTransport) ackedBytes() int64 {
	if t.cork == nil {
		return 0
	}
	return t.cork.ackedBytes()
}

// BeginBatch implements batchTransport.
func (t *wsTransport) BeginBatch() {
	if t.cork != nil {
		t.cork.cork()
	}
}

// Flush implements batchTransport.
func (t *wsTransport) Flush(ctx context.Context) error {
	if t.cork == nil {
		return nil
	}
	// The end of ctx closes the socket (watch, once per context: not a registration per
	// batch), which ends a write that blocks.
	t.watch(ctx, &t.writeCtx)
	if err := t.cork.uncork(context.Background()); err != nil {
		_ = t.c.CloseNow()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}

func (t *wsTransport) Ping(ctx context.Context) error { return t.c.Ping(ctx) }

func (t *wsTransport) Close(code protocol.CloseCode, reason string) error {
	if t.cork != nil {
		// Nothing stays held once the transport closes; the close frame writes through.
		ctx, cancel := context.WithTimeout(context.Background(), t.closeTimeout)
		_ = t.cork.uncork(ctx)
		cancel()
	}
	done := make(chan error, 1)
	go func() { done <- t.c.Close(websocket.StatusCode(code), reason) }()
	timer := time.NewTimer(t.closeTimeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		_ = t.c.CloseNow() // its error is the pending Close's, read next
		err = <-done
	}
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Dialer opens the peer's WebSocket to the hub. The header carries the bearer token.
type Dialer interface {
	Dial(ctx context.Context, url string, header http.Header) (Transport, error)
}

// DialError is a dial that reached the hub but was refused before the upgrade: HTTP 401 or
// 403, or another status. RetryAfter is the response's Retry-After in seconds, when it had
// one (a busy hub's 503).
type DialError struct {
	StatusCode int
	RetryAfter time.Duration
	Err        error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("ws: dial refused with HTTP %d: %v", e.StatusCode, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// WebSocketDialer dials with coder/websocket. The zero value uses http.DefaultClient.
type WebSocketDialer struct {
	HTTPClient   *http.Client
	CloseTimeout time.Duration // bounds each transport's close handshake; 0 means 5s
}

// Dial implements Dialer. The socket is corked by the connection's writer (batched writes)
// when the client's transport is an *http.Transport whose plain dial can be wrapped (no
// DialTLSContext): the dial then goes through a clone of it, for this connection alone.
func (d WebSocketDialer) Dial(ctx context.Context, url string, header http.Header) (Transport, error) {
	client, slot := d.corkingClient()
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:      client,
		HTTPHeader:      header,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &DialError{StatusCode: resp.StatusCode, RetryAfter: RetryAfter(resp.Header), Err: err}
		}
		return nil, err
	}
	ct := d.CloseTimeout
	if ct <= 0 {
		ct = 5 * time.Second
	}
	var cork *corkConn
	if slot != nil {
		cork = slot.conn
	}
	return newWSTransport(c, cork, ct), nil
}

// dialSlot receives the corkable socket of one dial.
type dialSlot struct{ conn *corkConn }

// corkingClient returns the HTTP client of one dial, and the slot its socket lands in; a
// nil slot when the configured client's transport cannot be wrapped.
func (d WebSocketDialer) corkingClient() (*http.Client, *dialSlot) {
	base := d.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	ht, ok := rt.(*http.Transport)
	//lint:ignore SA1019 http.Transport still dials with DialTLS when it is set
	if !ok || ht.DialTLSContext != nil || ht.DialTLS != nil {
		return d.HTTPClient, nil
	}
	slot := &dialSlot{}
	t := ht.Clone()
	dial := t.DialContext
	if dial == nil {
		var nd net.Dialer
		dial = nd.DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		slot.conn = newCorkConn(nc, nil)
		return slot.conn, nil
	}
	// The socket becomes the WebSocket's: it is never returned to an idle pool.
	t.DisableKeepAlives = true
	c := *base
	c.Transport = t
	return &c, slot
}
