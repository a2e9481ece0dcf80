package ws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/replication/protocol"
)

// Transport is one established WebSocket as the connection layer uses it: whole binary
// messages, each carrying exactly one frame (§1), WebSocket ping/pong for liveness, and a
// close with a code.
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

// wsTransport adapts a coder/websocket Conn.
type wsTransport struct {
	c            *websocket.Conn
	closeTimeout time.Duration
}

// NewWebSocketTransport adapts an established coder/websocket connection. closeTimeout bounds
// Close's close handshake; after it the socket is dropped without one. The library answers
// incoming pings with their payload, and its Conn.Ping matches a pong to the outstanding ping
// by exact payload (a decimal counter; see docs/decisions.md).
func NewWebSocketTransport(c *websocket.Conn, closeTimeout time.Duration) Transport {
	c.SetReadLimit(-1) // Read enforces the frame limit itself, without buffering the excess
	return &wsTransport{c: c, closeTimeout: closeTimeout}
}

func (t *wsTransport) Read(ctx context.Context, max int) ([]byte, error) {
	typ, r, err := t.c.Reader(ctx)
	if err != nil {
		return nil, t.mapErr(err)
	}
	// Read at most max+1 bytes: one more than allowed proves the message too large
	// without reading (or allocating for) the rest. The buffer grows with the bytes that
	// actually arrive, never from a declared length.
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, t.mapErr(err)
	}
	if n > int64(max) {
		return nil, &MessageTooLargeError{Limit: max}
	}
	if typ != websocket.MessageBinary {
		return nil, ErrTextMessage
	}
	return buf.Bytes(), nil
}

func (t *wsTransport) mapErr(err error) error {
	if code := websocket.CloseStatus(err); code != -1 {
		var ce websocket.CloseError
		errors.As(err, &ce)
		return &CloseError{Code: protocol.CloseCode(code), Reason: ce.Reason}
	}
	return err
}

func (t *wsTransport) Write(ctx context.Context, msg []byte) error {
	return t.c.Write(ctx, websocket.MessageBinary, msg)
}

func (t *wsTransport) Ping(ctx context.Context) error { return t.c.Ping(ctx) }

func (t *wsTransport) Close(code protocol.CloseCode, reason string) error {
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

// Dial implements Dialer.
func (d WebSocketDialer) Dial(ctx context.Context, url string, header http.Header) (Transport, error) {
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:      d.HTTPClient,
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
	return NewWebSocketTransport(c, ct), nil
}
