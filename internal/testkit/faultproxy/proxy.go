// Package faultproxy is a TCP proxy for fault-injection tests: it forwards every connection it
// accepts to one upstream address, through faults that can be switched on and off while
// connections run. The replication tests put one between a peer and the hub.
//
// The faults:
//
//   - latency: each chunk of bytes is delivered that long after it was read, in both
//     directions (a round trip gains twice the latency);
//   - bandwidth: a cap in bytes per second per direction, shared by every connection (one
//     link);
//   - cut: every current connection is reset at once (both ends see the error); new
//     connections work;
//   - down: new connections are reset as soon as they are accepted (the link is down);
//     together with a cut this is an outage, and toggling it is a flapping link;
//   - stall: nothing moves, in either direction, on any connection (bytes wait, bounded, and
//     are delivered in order when the stall ends; a close waits behind them); new
//     connections are accepted but stall too;
//   - half-open: the current connections go silent for good without either end being told:
//     bytes are read and dropped, and a close by one end is not passed to the other, which
//     has to notice by itself (its liveness checks); new connections work.
//
// Every fault applies to what is read after it is switched on. A Proxy is safe for
// concurrent use; Close ends every connection and waits for its goroutines.
package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// chunkBytes is the most one read takes from a connection.
	chunkBytes = 32 << 10
	// queueChunks bounds the chunks waiting in each direction of a connection (latency,
	// stall, bandwidth): at most queueChunks × chunkBytes (2 MiB) buffered per direction;
	// beyond it the proxy stops reading and TCP pushes back on the sender.
	queueChunks = 64
	// dialTimeout bounds the connection to the upstream.
	dialTimeout = 5 * time.Second
)

// Stats counts what a Proxy did.
type Stats struct {
	Accepted  int64 // connections accepted and forwarded
	Refused   int64 // connections reset because the link was down or the upstream refused
	Cut       int64 // connections reset by Cut
	HalfOpen  int64 // connections made half-open
	Active    int   // connections forwarding now (half-open and ended ones excluded)
	BytesUp   int64 // bytes delivered from clients to the upstream
	BytesDown int64 // bytes delivered from the upstream to clients
	Dropped   int64 // bytes read from half-open connections and dropped
}

// Proxy forwards connections from its listener to an upstream address.
type Proxy struct {
	ln     net.Listener
	target string
	up     *limiter // client → upstream
	down   *limiter // upstream → client

	mu       sync.Mutex // guards the fields below
	latency  time.Duration
	isDown   bool
	stallCh  chan struct{} // non-nil while stalled; closed when the stall ends
	links    map[*link]struct{}
	closed   bool
	wg       sync.WaitGroup // accept loop and every link's goroutines
	accepted int64
	refused  int64
	cut      int64
	halfOpen int64

	bytesUp, bytesDown, dropped atomic.Int64
}

// New starts a proxy on a free loopback port, forwarding to target (host:port).
func New(target string) (*Proxy, error) { return Listen("127.0.0.1:0", target) }

// Listen starts a proxy on addr, forwarding to target (host:port).
func Listen(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, up: &limiter{}, down: &limiter{}, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listen address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk read from now on by d, in each direction (0: none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = max(d, 0)
	p.mu.Unlock()
}

// SetBandwidth caps each direction of the link at bytesPerSecond, shared by every connection
// (0: no cap).
func (p *Proxy) SetBandwidth(bytesPerSecond int64) {
	p.up.setRate(bytesPerSecond)
	p.down.setRate(bytesPerSecond)
}

// SetDown makes the link refuse (reset) new connections while down is true. Connections
// already forwarding go on: call Cut for an outage.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.isDown = down
	p.mu.Unlock()
}

// Cut resets every forwarding connection (half-open ones included) and returns how many.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	list := make([]*link, 0, len(p.links))
	for l := range p.links {
		list = append(list, l)
	}
	p.cut += int64(len(list))
	p.mu.Unlock()
	for _, l := range list {
		l.reset()
	}
	return len(list)
}

// Stall stops every byte from moving, on every connection, until Resume. Idempotent.
func (p *Proxy) Stall() {
	p.mu.Lock()
	if p.stallCh == nil {
		p.stallCh = make(chan struct{})
	}
	p.mu.Unlock()
}

// Resume ends a stall: the bytes that waited are delivered in order. Idempotent.
func (p *Proxy) Resume() {
	p.mu.Lock()
	if p.stallCh != nil {
		close(p.stallCh)
		p.stallCh = nil
	}
	p.mu.Unlock()
}

// HalfOpen makes every current connection half-open for good (see the package comment) and
// returns how many. New connections are not affected.
func (p *Proxy) HalfOpen() int {
	p.mu.Lock()
	var n int
	for l := range p.links {
		if !l.silent.Swap(true) {
			n++
		}
	}
	p.halfOpen += int64(n)
	p.mu.Unlock()
	return n
}

// Heal switches every fault off: no latency, no bandwidth cap, up, not stalled. Connections
// already half-open stay so.
func (p *Proxy) Heal() {
	p.SetLatency(0)
	p.SetBandwidth(0)
	p.SetDown(false)
	p.Resume()
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Accepted: p.accepted, Refused: p.refused, Cut: p.cut, HalfOpen: p.halfOpen,
		BytesUp: p.bytesUp.Load(), BytesDown: p.bytesDown.Load(), Dropped: p.dropped.Load()}
	for l := range p.links {
		if !l.silent.Load() && !l.ended() {
			s.Active++
		}
	}
	return s
}

// Close stops accepting, resets every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	list := make([]*link, 0, len(p.links))
	for l := range p.links {
		list = append(list, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	// Reset every link before lifting a stall: lifted first, a forwarder could pass on
	// bytes it held back, and the client would read them from a proxy being closed.
	for _, l := range list {
		l.reset()
	}
	p.mu.Lock()
	if p.stallCh != nil {
		close(p.stallCh)
		p.stallCh = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// stalled returns the channel to wait on while stalled, or nil.
func (p *Proxy) stalled() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stallCh
}

func (p *Proxy) currentLatency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors: do not spin
			continue
		}
		p.mu.Lock()
		down, closed := p.isDown, p.closed
		if down || closed {
			p.refused++
		}
		p.mu.Unlock()
		if down || closed {
			resetConn(c)
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward dials the upstream for client c and runs the link until it ends.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		p.mu.Lock()
		p.refused++
		p.mu.Unlock()
		resetConn(c)
		return
	}
	l := &link{client: c, server: s, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		resetConn(c)
		resetConn(s)
		return
	}
	p.links[l] = struct{}{}
	p.accepted++
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, c, s, p.up, &p.bytesUp) }()
	go func() { defer wg.Done(); p.pipe(l, s, c, p.down, &p.bytesDown) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// chunk is a piece of a stream on its way: bytes, or the end of the stream (data nil).
type chunk struct {
	data []byte
	due  time.Time
}

// pipe moves one direction of a link, src to dst: a reader goroutine queues what it reads
// (stamped with the latency), and this goroutine delivers it, waiting out the latency, a
// stall and the bandwidth cap. When src ends, dst is closed after what was read before; a
// failure to deliver resets the link. On a half-open link nothing is delivered and src's end
// closes src only.
func (p *Proxy) pipe(l *link, src, dst net.Conn, lim *limiter, delivered *atomic.Int64) {
	queue := make(chan chunk, queueChunks)
	readerDone := make(chan struct{})
	var queued atomic.Int64 // bytes read from src and not yet written to dst
	go func() {
		defer close(readerDone)
		defer close(queue)
		for {
			// Under a bandwidth cap the link holds what it drains in an eighth of a
			// second, as a bottleneck's queue does; beyond it the proxy stops reading and TCP
			// pushes back on the sender, which then sees its data leave at the capped
			// rate rather than vanish into megabytes of buffer.
			for b := lim.backlog(); b > 0 && queued.Load() >= b; b = lim.backlog() {
				select {
				case <-l.done:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
			buf := make([]byte, chunkBytes)
			n, err := src.Read(buf)
			if n > 0 {
				if l.silent.Load() {
					p.dropped.Add(int64(n))
				} else {
					queued.Add(int64(n))
					select {
					case queue <- chunk{data: buf[:n], due: time.Now().Add(p.currentLatency())}:
					case <-l.done:
						return
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		// Whatever ends this direction: if the link is half-open, the other end is not told
		// (src is closed, dst is left open until its own end closes it, which ends the other
		// direction); otherwise the whole link ends.
		if l.silent.Load() {
			src.Close()
		} else {
			l.close()
		}
		for range queue { // let the reader finish (it stops at l.done or src's end)
		}
		<-readerDone
	}()
	for {
		var c chunk
		var ok bool
		select {
		case c, ok = <-queue:
		case <-l.done:
			return
		}
		if !ok {
			p.waitStall(l) // the end of the stream waits behind a stall like the bytes
			return
		}
		if !l.wait(c.due) {
			return
		}
		for len(c.data) > 0 {
			if !p.waitStall(l) {
				return
			}
			if l.silent.Load() {
				p.dropped.Add(int64(len(c.data)))
				queued.Add(-int64(len(c.data)))
				break
			}
			n := min(len(c.data), lim.slice())
			if !l.wait(lim.reserve(n)) {
				return
			}
			if _, err := dst.Write(c.data[:n]); err != nil {
				return
			}
			delivered.Add(int64(n))
			queued.Add(-int64(n))
			c.data = c.data[n:]
		}
	}
}

// waitStall waits while the proxy is stalled: false if the link ended meanwhile.
func (p *Proxy) waitStall(l *link) bool {
	for {
		st := p.stalled()
		if st == nil {
			return true
		}
		select {
		case <-st:
		case <-l.done:
			return false
		}
	}
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	silent         atomic.Bool // half-open: nothing is delivered, ends are not passed on
	once           sync.Once
	done           chan struct{} // closed when the link ends
}

// ended reports whether the link ended (its goroutines may still be finishing).
func (l *link) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// wait sleeps until t (or the link ends): false if the link ended.
func (l *link) wait(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-l.done:
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-l.done:
		return false
	}
}

// close ends the link, closing both connections.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.server.Close()
	})
}

// reset ends the link with a TCP reset on both connections.
func (l *link) reset() {
	l.once.Do(func() {
		close(l.done)
		resetConn(l.client)
		resetConn(l.server)
	})
}

// resetConn closes c with a TCP RST rather than a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// limiter paces one direction of the link: a reservation clock at rate bytes per second.
type limiter struct {
	mu   sync.Mutex // guards rate and next
	rate int64
	next time.Time // when the bytes reserved so far have gone through
}

func (l *limiter) setRate(r int64) {
	l.mu.Lock()
	l.rate = max(r, 0)
	l.next = time.Time{}
	l.mu.Unlock()
}

// slice is the most bytes to write at once: a twentieth of a second's worth (at least 512
// bytes), so a cap is smooth; everything when there is no cap.
func (l *limiter) slice() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rate == 0 {
		return chunkBytes
	}
	return int(min(max(l.rate/20, 512), chunkBytes))
}

// backlog is how many bytes the link may hold undelivered in this direction: what the cap
// drains in an eighth of a second (at least 8 KiB); 0, no bound but the queue's, without a
// cap.
func (l *limiter) backlog() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rate == 0 {
		return 0
	}
	return max(l.rate/8, 8<<10)
}

// reserve books n bytes and returns when they may be written.
func (l *limiter) reserve(n int) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.rate == 0 {
		return now
	}
	start := l.next
	if start.Before(now) {
		start = now
	}
	l.next = start.Add(time.Duration(int64(n) * int64(time.Second) / l.rate))
	return start
}
