package ws

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// TokenSource returns the bearer token for the next dial. It is called before every dial,
// so a rotated token file is picked up; the peer never logs the token.
type TokenSource func() (string, error)

// TokenFromFile reads the token from a file (surrounding white space trimmed).
func TokenFromFile(path string) TokenSource {
	return func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("ws: token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", errors.New("ws: token file is empty")
		}
		return tok, nil
	}
}

// TokenFromEnv reads the token from an environment variable.
func TokenFromEnv(name string) TokenSource {
	return func() (string, error) {
		tok := strings.TrimSpace(os.Getenv(name))
		if tok == "" {
			return "", fmt.Errorf("ws: environment variable %s is empty", name)
		}
		return tok, nil
	}
}

// Rand is the injected random source of the backoff jitter.
type Rand interface {
	// Int64N returns a uniform value in [0, n).
	Int64N(n int64) int64
}

// PeerOptions configure a Peer.
type PeerOptions struct {
	Config        protocol.Config // validated by NewPeer
	InstanceID    string          // this peer (HELLO's peerInstanceId)
	HubInstanceID string          // the hub it expects (HELLO's expectedHubInstanceId)
	URL           string          // the hub's replication endpoint: ws://host:port/v1/replication
	// FailoverURLs are further endpoints of the same hub (the nodes of a hub cluster, which
	// all present HubInstanceID). After a failed dial or a lost connection the peer dials
	// the next endpoint, in turn, URL first, after its usual backoff.
	FailoverURLs []string
	Token        TokenSource // required
	Dialer       Dialer      // nil: WebSocketDialer{}
	Namespaces   seam.NamespaceFactory
	Clock        clock.Clock // nil: clock.Real()
	Rand         Rand        // backoff jitter; nil: a generator seeded from crypto/rand
	Nonce        io.Reader   // HELLO connectionNonce; nil: crypto/rand
	Observer     observer.Observer
	Logger       *slog.Logger
	// FrameTap, as HubOptions.FrameTap: connectionID is "" until HELLO_ACK has told it.
	FrameTap func(connectionID string, sent bool, msg []byte)
	// SlowAfter is the number of consecutive 1011 closes after which the backoff switches
	// to the slow cadence and warns; 0 means 5.
	SlowAfter int
	// ContractBackoff backs off exactly as docs/protocol.md#backoff writes it: the attempt
	// counter resets only after backoffResetAfterMs of stable ready, the delay is not
	// bounded by the length of the outage (BackoffCap), and a busy hub's Retry-After is not
	// honoured. For comparison and conformance runs; the default reconnects faster after
	// outages and on flapping links (docs/decisions.md).
	ContractBackoff bool
}

// PeerState is a state of the peer's connection state machine.
type PeerState = observer.ConnectionState

// Peer is the peer's connection controller: the peer's connection state machine
// (docs/protocol.md#peer-connection-states: stopped, disconnected, connecting, handshaking,
// ready, draining, backoff, blocked) with full-jitter backoff. One goroutine, the
// controller, owns the machine and runs what the methods post to it; a connection, when
// there is one, runs its own goroutines (see the package documentation). Its methods may be
// called concurrently.
type Peer struct {
	opts PeerOptions
	cfg  *protocol.Config
	em   *observer.Emitter
	log  *slog.Logger

	box     mailbox // functions posted to the controller goroutine
	done    chan struct{}
	pub     atomic.Value         // PeerState, for State
	pubURL  atomic.Value         // string: the URL of the current or last dial, for URL
	pubConn atomic.Pointer[conn] // the current connection, for Load
	closed  atomic.Bool
	bg      sync.WaitGroup // stray transports being closed

	// Owned by the controller goroutine.
	state      PeerState
	gen        uint64 // connection generation: results of older dials and connections are ignored
	conn       *conn
	connID     string
	dialCancel context.CancelFunc
	dialing    bool
	timer      clock.Timer
	timerGen   uint64
	attempt    int
	slowCount  int // consecutive 1011 closes
	readyAt    time.Time
	// downSince is when the peer lost its last working connection (or, before it had one,
	// first failed to get one); zero while a connection works. It bounds the backoff.
	downSince time.Time
	urls      []string // URL, then FailoverURLs
	urlIdx    int      // the endpoint of the next dial
	stopping  bool
	waiters   []chan struct{} // Stop calls waiting for stopped and idle
	exiting   bool
	watchers  []func(PeerState)
}

// NewPeer validates opts and returns a stopped peer; call Start.
func NewPeer(opts PeerOptions) (*Peer, error) {
	cfg := opts.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !protocol.ValidInstanceID(opts.InstanceID) || !protocol.ValidInstanceID(opts.HubInstanceID) {
		return nil, errors.New("ws: peer and hub instance ids must match ^[a-z][a-z0-9-]{0,62}$")
	}
	if opts.Token == nil {
		return nil, errors.New("ws: NewPeer needs a TokenSource")
	}
	if opts.Namespaces == nil {
		return nil, errors.New("ws: NewPeer needs a NamespaceFactory")
	}
	urls := append([]string{opts.URL}, opts.FailoverURLs...)
	for _, u := range urls {
		if u == "" {
			return nil, errors.New("ws: NewPeer needs the hub's URL (and no empty FailoverURLs)")
		}
	}
	if opts.Dialer == nil {
		opts.Dialer = WebSocketDialer{CloseTimeout: cfg.CloseTimeout}
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Nonce == nil {
		opts.Nonce = rand.Reader
	}
	if opts.Rand == nil {
		var seed [32]byte
		if _, err := io.ReadFull(rand.Reader, seed[:]); err != nil {
			return nil, err
		}
		opts.Rand = mrand.New(mrand.NewChaCha8(seed))
	}
	if opts.SlowAfter <= 0 {
		opts.SlowAfter = 5
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Peer{opts: opts, cfg: &cfg, log: log, state: observer.ConnStopped, urls: urls,
		em:  observer.NewEmitter(observer.SidePeer, opts.Observer, opts.Clock),
		box: newMailbox(), done: make(chan struct{})}
	p.pub.Store(observer.ConnStopped)
	p.pubURL.Store(urls[0])
	go p.run()
	return p, nil
}

// State returns the current state.
func (p *Peer) State() PeerState { return p.pub.Load().(PeerState) }

// URL returns the hub URL of the current (or last) connection attempt: with several
// --hub-url, the node the peer is on (any goroutine).
func (p *Peer) URL() string { return p.pubURL.Load().(string) }

// Watch calls f (on the controller goroutine; it must not block) with every state the
// peer enters from now on.
func (p *Peer) Watch(f func(PeerState)) { p.post(func() { p.watchers = append(p.watchers, f) }) }

// Start starts a stopped or blocked peer: it dials at once.
func (p *Peer) Start() {
	p.post(func() {
		switch p.state {
		case observer.ConnStopped, observer.ConnBlocked:
			p.stopping = false
			p.attempt, p.slowCount, p.downSince = 0, 0, time.Time{}
			p.set(observer.ConnDisconnected)
			p.dial()
		}
	})
}

// ConfigChanged tells the controller that its configuration or token changed: a blocked or
// backing-off peer dials again at once, with the attempt counter reset. In other states the
// next dial uses the new settings.
func (p *Peer) ConfigChanged() {
	p.post(func() {
		switch p.state {
		case observer.ConnBlocked, observer.ConnBackoff:
			p.stopTimer()
			p.attempt, p.slowCount, p.downSince = 0, 0, time.Time{}
			p.set(observer.ConnDisconnected)
			p.dial()
		}
	})
}

// Stop stops the peer: a ready connection drains (the namespace layer closes its channels
// and calls seam.Session.Quiesced, or closeTimeoutMs passes), any other attempt is
// abandoned. Stop returns when the peer is stopped and its connection is gone, or when ctx
// ends. An observer calls it from a goroutine of its own: events are delivered on the
// connection's goroutine, which Stop waits for.
func (p *Peer) Stop(ctx context.Context) error {
	ch := make(chan struct{})
	if !p.post(func() { p.stop(ch, false) }) {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the peer at once, without draining (a ready connection is closed with 1000),
// and ends the controller goroutine; it is idempotent and waits — so, like Stop, not from
// an observer's own call.
func (p *Peer) Close() {
	if p.closed.Swap(true) {
		<-p.done
		return
	}
	ch := make(chan struct{})
	if p.post(func() { p.exiting = true; p.stop(ch, true) }) {
		<-ch
	}
	<-p.done
	p.bg.Wait()
}

func (p *Peer) post(f func()) bool { return p.box.post(f) }

func (p *Peer) run() {
	defer close(p.done)
	for {
		<-p.box.wake
		for _, f := range p.box.take() {
			f()
		}
		if p.exiting && p.idle() {
			p.box.shut() // as before: what arrives now concerns a controller that has stopped
			p.release()
			return
		}
	}
}

// idle: stopped, with no dial and no connection left.
func (p *Peer) idle() bool { return p.state == observer.ConnStopped && !p.dialing && p.conn == nil }

func (p *Peer) release() {
	if !p.idle() {
		return
	}
	for _, ch := range p.waiters {
		close(ch)
	}
	p.waiters = nil
}

func (p *Peer) set(s PeerState) {
	from := p.state
	if from == s {
		return
	}
	p.state = s
	p.pub.Store(s)
	if p.em.Enabled() {
		ev := observer.ConnectionStateChanged{From: from, To: s}
		// The connectionId only once the handshake gave one.
		if p.connID != "" && (s == observer.ConnReady || s == observer.ConnDraining || from == observer.ConnReady || from == observer.ConnDraining) {
			ev.ConnectionID = observer.Some(p.connID)
		}
		p.em.Emit(ev)
	}
	for _, w := range p.watchers {
		w(s)
	}
}

func (p *Peer) stop(ch chan struct{}, abort bool) {
	p.waiters = append(p.waiters, ch)
	p.stopping = true
	switch {
	case p.state == observer.ConnReady && !abort:
		p.set(observer.ConnDraining)
		c := p.conn
		c.post(func() { c.localDrain(p.cfg.CloseTimeout) })
	case p.state == observer.ConnDraining && !abort:
	default:
		p.stopTimer()
		if p.dialCancel != nil {
			p.dialCancel()
		}
		if c := p.conn; c != nil {
			c.post(func() {
				c.closeNow(protocol.CloseNormal, seam.CloseInfo{Code: protocol.CloseNormal, Cause: seam.CauseShutdown})
			})
		}
		p.gen++
		p.set(observer.ConnStopped)
	}
	p.release()
}

func (p *Peer) stopTimer() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.timerGen++
}

// dial: disconnected → connecting.
func (p *Peer) dial() {
	p.gen++
	gen := p.gen
	p.set(observer.ConnConnecting)
	token, err := p.opts.Token()
	if err != nil {
		p.log.Warn("replication token unavailable; blocked until the configuration changes", slog.String("error", err.Error()))
		p.set(observer.ConnBlocked)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.dialCancel, p.dialing = cancel, true
	// The dial is bounded by the handshake timeout, through the injected clock.
	t := p.opts.Clock.AfterFunc(p.cfg.HelloTimeout, cancel)
	header := http.Header{"Authorization": {"Bearer " + token}}
	url := p.urls[p.urlIdx]
	p.pubURL.Store(url)
	go func() {
		tr, err := p.opts.Dialer.Dial(ctx, url, header)
		t.Stop()
		if !p.post(func() { p.dialed(gen, tr, err) }) && tr != nil {
			_ = tr.Close(protocol.CloseNormal, "") // the controller is gone: best effort
		}
	}()
}

func (p *Peer) dialed(gen uint64, tr Transport, err error) {
	p.dialing = false
	p.dialCancel = nil
	if gen != p.gen || p.state != observer.ConnConnecting {
		if tr != nil {
			p.closeStray(tr)
		}
		p.release()
		return
	}
	if err != nil {
		var de *DialError
		if errors.As(err, &de) {
			switch {
			case de.StatusCode == http.StatusServiceUnavailable || de.StatusCode == http.StatusTooManyRequests:
				if de.RetryAfter > 0 && !p.opts.ContractBackoff {
					// The hub is busy and said when to come back (admission control).
					p.retryAfter(de.RetryAfter)
					return
				}
			case de.StatusCode >= 400 && de.StatusCode < 500:
				// A configuration error (401, 403, a wrong path): retrying cannot help. The
				// binary says what to fix; this line only records the decision.
				p.log.Debug("replication upgrade refused: blocked", slog.Int("status", de.StatusCode))
				p.set(observer.ConnBlocked)
				return
			}
		}
		p.backoff(observer.BackoffDialFailed, 0)
		return
	}
	var nonce [16]byte
	if _, err := io.ReadFull(p.opts.Nonce, nonce[:]); err != nil {
		p.closeStray(tr)
		p.backoff(observer.BackoffDialFailed, 0)
		return
	}
	p.connID = ""
	c := newConn(connParams{
		side: observer.SidePeer, cfg: p.cfg, clock: p.opts.Clock, em: p.em, log: p.log, t: tr,
		factory: p.opts.Namespaces, peerID: p.opts.InstanceID, hubID: p.opts.HubInstanceID, nonce: nonce,
		tap:       p.opts.FrameTap,
		onReady:   func(c *conn) { id := c.connID; p.post(func() { p.connReady(gen, id) }) },
		onWorking: func(c *conn) { p.post(func() { p.connWorking(gen) }) },
		onGoAway:  func(c *conn, d seam.Drain) { p.post(func() { p.goAway(gen) }) },
		onClosed:  func(c *conn, info seam.CloseInfo) { p.post(func() { p.connClosed(gen, info) }) },
		onExit:    func(c *conn) { p.post(func() { p.connExited(c) }) },
	})
	p.conn = c
	p.pubConn.Store(c)
	p.set(observer.ConnHandshaking)
	c.start()
}

// closeStray closes a transport no connection owns, off the controller goroutine.
func (p *Peer) closeStray(tr Transport) {
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		_ = tr.Close(protocol.CloseNormal, "") // nobody uses it: best effort
	}()
}

func (p *Peer) connReady(gen uint64, connID string) {
	if gen != p.gen || p.state != observer.ConnHandshaking {
		return
	}
	p.connID = connID
	p.readyAt = p.opts.Clock.Now()
	p.set(observer.ConnReady)
}

// connWorking: the namespace layer reports that the connection does the work it was made
// for (its targets are live). The backoff starts afresh from here: the next loss of the
// connection is retried after at most baseBackoffMs, however many failures came before. A
// departure from docs/protocol.md#backoff, which resets only after backoffResetAfterMs of
// stable ready (see docs/decisions.md): a hub that crashes every few seconds, or a link cut
// as often, would otherwise keep the peer away most of the time the hub is up.
func (p *Peer) connWorking(gen uint64) {
	if gen != p.gen || p.state != observer.ConnReady || p.opts.ContractBackoff {
		return
	}
	p.attempt, p.downSince = 0, time.Time{}
}

func (p *Peer) goAway(gen uint64) {
	if gen == p.gen && p.state == observer.ConnReady {
		p.set(observer.ConnDraining)
	}
}

// Load is the outbound load of the current connection, if any (any goroutine).
func (p *Peer) Load() Load {
	var l Load
	if c := p.pubConn.Load(); c != nil {
		l.add(c)
	}
	return l
}

// Connection describes the peer's current connection (false when it has none); its
// ConnectionID is left empty (only the owner goroutine reads it on the peer).
func (p *Peer) Connection() (ConnStatus, bool) {
	c := p.pubConn.Load()
	if c == nil {
		return ConnStatus{}, false
	}
	s := ConnStatus{State: c.publicState(), QueuedBytes: c.pubQueued.Load(), InFlight: c.pubInFlight.Load(),
		PingRTT: time.Duration(c.pub.pingRTT.Load())}
	if ns := c.pub.readyAt.Load(); ns != 0 {
		s.ReadyAt = time.Unix(0, ns)
	}
	return s, true
}

func (p *Peer) connExited(c *conn) {
	if p.conn == c {
		p.conn = nil
		p.pubConn.CompareAndSwap(c, nil)
	}
	p.release()
}
