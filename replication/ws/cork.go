package ws

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// corkConn is the net.Conn under a WebSocket, able to hold what is written to it until the
// connection's writer has written every frame that was ready: coder/websocket flushes its
// buffer after every message, which would cost one write(2) per frame. Between cork and
// uncork, writes are appended to a buffer taken from a pool; uncork writes the buffer in one
// call and returns it to the pool, so an idle connection holds none. Writes made while it is
// not corked (a pong the reader answers, a ping, a close frame) go straight to the socket.
// Whatever is written during a batch — a pong included — leaves with that batch's uncork,
// never later.
//
// Reads pass through, after the bytes the HTTP server had already buffered when the
// connection was hijacked (pre).
type corkConn struct {
	net.Conn

	mu     sync.Mutex // guards corked, buf and every write to Conn (their order is the wire order)
	corked bool
	buf    *[]byte // pooled; nil when empty

	readMu sync.Mutex      // guards pre, rbuf, roff and the fill fields, and orders reads
	pre    []byte          // bytes read before the hijack, returned first
	raw    syscall.RawConn // the socket's, when it has one: reads wait for data without a buffer
	rbuf   *[]byte         // pooled; holds what the last read(2) brought, from roff on
	roff   int
	// fill's read(2), bound once (raw.Read takes a func: a closure per read would cost
	// allocations), and what it brought.
	readReady func(fd uintptr) bool
	fillBuf   *[]byte
	fillN     int
	fillErr   error

	moved atomic.Int64 // bytes read from and written to the socket (liveness)

	tcp   syscall.RawConn // the TCP socket under Conn (under TLS too), when there is one
	acked atomic.Int64    // the most bytes the remote's TCP was seen to have acknowledged
}

const (
	// corkMaxBytes is how much a corked connection holds before it writes what it has
	// while staying corked; the writer flushes after flushBatchBytes anyway, so this is a
	// safety bound for a single large frame.
	corkMaxBytes = 256 << 10
	// corkBufBytes is the initial capacity of a pooled cork buffer.
	corkBufBytes = 16 << 10
	// hubWriteBufBytes is the size of the bufio.Writer coder/websocket writes frames into
	// on the hub. The cork buffer does the batching, so this one only needs to hold a
	// frame header and a small frame: a larger one would cost memory on every idle
	// connection.
	hubWriteBufBytes = 256
)

var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, corkBufBytes); return &b }}

func newCorkConn(c net.Conn, pre []byte) *corkConn {
	cc := &corkConn{Conn: c, pre: pre}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			cc.raw = raw
			cc.readReady = cc.readSocket
		}
	}
	cc.tcp = tcpRawConn(c)
	return cc
}

// tcpRawConn finds the TCP socket under c, through TLS and other wrappers that name the
// connection they wrap (NetConn); nil when there is none.
func tcpRawConn(c net.Conn) syscall.RawConn {
	for range 4 {
		switch x := c.(type) {
		case *net.TCPConn:
			raw, err := x.SyscallConn()
			if err != nil {
				return nil
			}
			return raw
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// ackedBytes reports how many of the bytes written to the socket the remote's TCP has
// acknowledged, as far as the system tells (Linux; 0 elsewhere and for a socket that is not
// TCP). It never goes down, so a socket that stops answering after it closed reads as no
// progress. One getsockopt(2) per call: liveness reads it only when a ping leaves and when
// its pong timeout fires.
func (c *corkConn) ackedBytes() int64 {
	if c.tcp == nil {
		return 0
	}
	n, ok := tcpAckedBytes(c.tcp)
	if !ok {
		return c.acked.Load()
	}
	for {
		old := c.acked.Load()
		if n <= old || c.acked.CompareAndSwap(old, n) {
			return max(n, old)
		}
	}
}

// readBufBytes is the size of the pooled buffers the socket is read into: a burst of small
// frames is read with one read(2) per this many bytes.
const readBufBytes = 16 << 10

var readPool = sync.Pool{New: func() any { b := make([]byte, readBufBytes); return &b }}

// Read returns the bytes buffered before the hijack first, then reads the socket. A read
// waits for data without holding a buffer (the socket's readiness, through its RawConn);
// once data is there it is read into a pooled buffer of readBufBytes, which goes back to
// the pool when it has been consumed. So an idle connection holds no read buffer, and a
// busy one reads many frames per read(2) even though coder/websocket's own buffer in
// front of this one is small (hubReadBufBytes).
func (c *corkConn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		if len(c.pre) == 0 {
			c.pre = nil
		}
		return n, nil
	}
	if c.rbuf == nil {
		if c.raw == nil || len(p) >= readBufBytes {
			n, err := c.Conn.Read(p)
			c.moved.Add(int64(n))
			return n, err
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*c.rbuf)[c.roff:])
	c.roff += n
	if c.roff == len(*c.rbuf) {
		*c.rbuf = (*c.rbuf)[:cap(*c.rbuf)]
		readPool.Put(c.rbuf)
		c.rbuf, c.roff = nil, 0
	}
	return n, nil
}

// fill waits until the socket has data and reads it into a pooled buffer. The caller
// holds readMu.
func (c *corkConn) fill() error {
	c.fillBuf, c.fillN, c.fillErr = nil, 0, nil
	err := c.raw.Read(c.readReady)
	got, n := c.fillBuf, c.fillN
	if err == nil {
		err = c.fillErr
	}
	c.fillBuf, c.fillErr = nil, nil
	if err != nil || n <= 0 {
		if got != nil {
			readPool.Put(got)
		}
		if err == nil {
			return io.EOF // as net.Conn reports the end of the stream: unwrapped
		}
		return &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	c.moved.Add(int64(n))
	*got = (*got)[:n]
	c.rbuf, c.roff = got, 0
	return nil
}

// readSocket is fill's read(2) once the socket is readable (syscall.RawConn.Read): it
// reads into a pooled buffer, or reports that there was nothing yet (EAGAIN) without
// keeping one. The caller holds readMu.
func (c *corkConn) readSocket(fd uintptr) bool {
	b := readPool.Get().(*[]byte)
	for {
		c.fillN, c.fillErr = syscall.Read(int(fd), (*b)[:cap(*b)])
		if c.fillErr != syscall.EINTR {
			break
		}
	}
	if c.fillErr == syscall.EAGAIN {
		readPool.Put(b) // nothing yet: wait for readiness without the buffer
		return false
	}
	c.fillBuf = b
	return true
}

// socketWritePiece is the most one write(2) is given: a large batch or frame is written in
// pieces, so that its progress on a slow link shows (moved) before all of it has left.
const socketWritePiece = 16 << 10

// writeSocket writes p to the socket in pieces, counting what left. The caller holds mu.
func (c *corkConn) writeSocket(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := c.Conn.Write(p[done:min(len(p), done+socketWritePiece)])
		done += n
		c.moved.Add(int64(n))
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// Write appends p to the cork buffer while corked, or writes it through.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return c.writeSocket(p)
	}
	held := 0
	if c.buf != nil {
		held = len(*c.buf)
	}
	if held+len(p) > corkMaxBytes {
		// Too much to hold: what is held leaves first, then p, in order.
		if err := c.writeHeld(); err != nil {
			return 0, err
		}
		return c.writeSocket(p)
	}
	if c.buf == nil {
		c.buf = corkPool.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

// writeHeld writes the held bytes and gives the buffer back. The caller holds mu.
func (c *corkConn) writeHeld() error {
	if c.buf == nil {
		return nil
	}
	b := c.buf
	c.buf = nil
	_, err := c.writeSocket(*b)
	if cap(*b) <= corkMaxBytes {
		*b = (*b)[:0]
		corkPool.Put(b)
	}
	return err
}

// cork starts holding writes.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what is held in one call and stops holding writes. A write that blocks is
// ended by closing the socket when ctx ends.
func (c *corkConn) uncork(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if c.buf == nil {
		return nil
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { _ = c.Conn.SetWriteDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	return c.writeHeld()
}

// held reports the bytes held (tests).
func (c *corkConn) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return 0
	}
	return len(*c.buf)
}

// corkingResponseWriter hands coder/websocket a corkConn when it hijacks the connection
// of an upgrade request, and a small write buffer in front of it.
type corkingResponseWriter struct {
	http.ResponseWriter
	conn *corkConn // set by Hijack
}

func (w *corkingResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack implements http.Hijacker over the wrapped writer's.
func (w *corkingResponseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	// The server may have read past the request: those bytes belong to the WebSocket.
	var pre []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		pre = append([]byte(nil), b...)
	}
	w.conn = newCorkConn(nc, pre)
	return w.conn, bufio.NewReadWriter(bufio.NewReaderSize(w.conn, hubReadBufBytes), bufio.NewWriterSize(w.conn, hubWriteBufBytes)), nil
}

// hubReadBufBytes is the buffer coder/websocket reads frame headers and small payloads
// through on the hub. The socket is read in readBufBytes at a time below it (Read), so it
// only needs to be small: a larger one would cost memory on every idle connection.
const hubReadBufBytes = 128
