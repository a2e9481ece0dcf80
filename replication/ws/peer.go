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

	"github.com/nomicore/nomicore/internal/clock"
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

// Rand is the injected random source of the backoff jitter (§15.1).
type Rand interface {
	// Int64N returns a uniform value in [0, n).
	Int64N(n int64) int64
}

// PeerOptions configure a Peer.
type PeerOptions struct {
	Config        protocol.Config // validated by NewPeer
	InstanceID    string          // this peer (§6.1 peerInstanceId)
	HubInstanceID string          // the hub it expects (§6.1 expectedHubInstanceId)
	URL           string          // ws://host:port/v1/replication
	Token         TokenSource     // required
	Dialer        Dialer          // nil: WebSocketDialer{}
	Namespaces    seam.NamespaceFactory
	Clock         clock.Clock // nil: clock.Real()
	Rand          Rand        // backoff jitter; nil: a generator seeded from crypto/rand
	Nonce         io.Reader   // HELLO connectionNonce; nil: crypto/rand
	Observer      observer.Observer
	Logger        *slog.Logger
	// SlowAfter is the number of consecutive 1011 closes after which the backoff switches
	// to the slow cadence and warns (§15.1); 0 means 5.
	SlowAfter int
}

// PeerState is a state of the peer connection state machine (§15.1).
type PeerState = observer.ConnectionState

// Peer is the peer's connection controller: the §15.1 state machine (stopped,
// disconnected, connecting, handshaking, ready, draining, backoff, blocked) with full-jitter
// backoff. One goroutine owns the machine; a connection, when there is one, runs its own
// goroutines (see Hub for the per-connection design).
type Peer struct {
	opts PeerOptions
	cfg  *protocol.Config
	em   *observer.Emitter
	log  *slog.Logger

	box     mailbox // functions posted to the controller goroutine
	done    chan struct{}
	pub     atomic.Value         // PeerState, for State
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
	stopping   bool
	waiters    []chan struct{} // Stop calls waiting for stopped and idle
	exiting    bool
	watchers   []func(PeerState)
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
	p := &Peer{opts: opts, cfg: &cfg, log: log, state: observer.ConnStopped,
		em:  observer.NewEmitter(observer.SidePeer, opts.Observer, opts.Clock),
		box: newMailbox(), done: make(chan struct{})}
	p.pub.Store(observer.ConnStopped)
	go p.run()
	return p, nil
}

// State returns the current state.
func (p *Peer) State() PeerState { return p.pub.Load().(PeerState) }

// Watch calls f (on the controller goroutine; it must not block) with every state the
// peer enters from now on.
func (p *Peer) Watch(f func(PeerState)) { p.post(func() { p.watchers = append(p.watchers, f) }) }

// Start starts a stopped or blocked peer (§15.1 stopped --start--> disconnected --dial-->
// connecting; blocked --start--> stopped, then started).
func (p *Peer) Start() {
	p.post(func() {
		switch p.state {
		case observer.ConnStopped, observer.ConnBlocked:
			p.stopping = false
			p.attempt, p.slowCount = 0, 0
			p.set(observer.ConnDisconnected)
			p.dial()
		}
	})
}

// ConfigChanged tells the controller that its configuration or token changed (§15.1
// config-change): a blocked or backing-off peer dials again at once, with the attempt
// counter reset. In other states the next dial uses the new settings.
func (p *Peer) ConfigChanged() {
	p.post(func() {
		switch p.state {
		case observer.ConnBlocked, observer.ConnBackoff:
			p.stopTimer()
			p.attempt, p.slowCount = 0, 0
			p.set(observer.ConnDisconnected)
			p.dial()
		}
	})
}

// Stop stops the peer (§15.1 local-stop): a ready connection drains (the namespace layer
// closes its channels and calls Session.Quiesced, or closeTimeoutMs passes), any other
// attempt is abandoned. Stop returns when the peer is stopped and its connection is gone,
// or when ctx ends. An observer calls it from a goroutine of its own (§23.4: events are
// delivered on the connection's goroutine, which Stop waits for).
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
		// §23.3: connectionId only once the handshake gave one.
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
	go func() {
		tr, err := p.opts.Dialer.Dial(ctx, p.opts.URL, header)
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
		if errors.As(err, &de) && de.StatusCode >= 400 && de.StatusCode < 500 {
			// §15.1 connecting --permanent-config-failure--> blocked (401, 403, a wrong path).
			p.log.Warn("replication upgrade refused; blocked until the configuration changes", slog.Int("status", de.StatusCode))
			p.set(observer.ConnBlocked)
			return
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
		onReady:  func(c *conn) { id := c.connID; p.post(func() { p.connReady(gen, id) }) },
		onGoAway: func(c *conn, d seam.Drain) { p.post(func() { p.goAway(gen) }) },
		onClosed: func(c *conn, info seam.CloseInfo) { p.post(func() { p.connClosed(gen, info) }) },
		onExit:   func(c *conn) { p.post(func() { p.connExited(c) }) },
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

func (p *Peer) connExited(c *conn) {
	if p.conn == c {
		p.conn = nil
		p.pubConn.CompareAndSwap(c, nil)
	}
	p.release()
}

// connClosed applies §15.1 to a closed connection.
func (p *Peer) connClosed(gen uint64, info seam.CloseInfo) {
	if gen != p.gen {
		return
	}
	from := p.state
	defer func() { p.connID = "" }()
	if p.stopping {
		p.set(observer.ConnStopped)
		return
	}
	if from == observer.ConnReady || from == observer.ConnDraining {
		// §15.1: the attempt counter resets only after backoffResetAfterMs of stable ready.
		if p.opts.Clock.Now().Sub(p.readyAt) >= p.cfg.BackoffResetAfter {
			p.attempt, p.slowCount = 0, 0
		}
	}
	if info.Cause == seam.CauseReconnect {
		p.backoff(observer.BackoffNamespaceRecovery, 0)
		return
	}
	if g := info.GoAway; g != nil {
		switch g.ReasonCode {
		case protocol.GoAwayServerRestarting:
			if g.HasRetryAfter {
				p.backoff(observer.BackoffGoAwayRetryHint, g.RetryAfter)
			} else {
				p.backoff(observer.BackoffGoAwayClosed, 0)
			}
		case protocol.GoAwayServerShuttingDown, protocol.GoAwayReauthRequired:
			p.log.Warn("replication hub asked this peer to stay away; blocked until start or a configuration change", slog.String("reason", g.ReasonCode))
			p.set(observer.ConnBlocked)
		default:
			p.backoff(observer.BackoffGoAwayClosed, 0)
		}
		return
	}
	switch info.Cause {
	case seam.CauseHelloTimeout:
		p.backoff(observer.BackoffHelloTimeout, 0)
		return
	case seam.CausePongTimeout:
		p.backoff(observer.BackoffPongTimeout, 0)
		return
	}
	if permanent(info) {
		p.log.Warn("replication connection failed permanently; blocked until start or a configuration change",
			slog.String("code", string(info.Error)), slog.Int("wsCloseCode", int(info.Code)))
		p.set(observer.ConnBlocked)
		return
	}
	if info.Code == protocol.CloseInternal {
		p.slowCount++
		p.backoff(observer.BackoffConnectionBackpressure, 0)
		return
	}
	p.backoff(observer.BackoffSocketClosed, 0)
}

// permanent: §15.1 "1002/1008：blocked" — and every connection error whose registry retry is
// no or config (FRAME_TOO_LARGE's 1009 included); 1011 and transport losses back off.
func permanent(info seam.CloseInfo) bool {
	if info.Error != "" {
		if spec, ok := protocol.LookupError(protocol.ScopeConnection, info.Error); ok {
			return spec.Retry == protocol.RetryNo || spec.Retry == protocol.RetryConfig
		}
		return false
	}
	switch info.Code {
	case protocol.CloseProtocolError, protocol.ClosePolicy, protocol.CloseTooBig:
		return true
	}
	return false
}

// BackoffDelay is the §15.1 full-jitter delay: random(0, min(maxBackoff, base·2^attempt)),
// in whole milliseconds, both ends included.
func BackoffDelay(r Rand, base, max time.Duration, attempt int) time.Duration {
	capMs := int64(max / time.Millisecond)
	baseMs := int64(base / time.Millisecond)
	if attempt < 62 && baseMs <= capMs>>attempt {
		capMs = baseMs << attempt
	}
	return time.Duration(r.Int64N(capMs+1)) * time.Millisecond
}

// backoff: → backoff, with the timer to connecting. extra is a GOAWAY retryAfterMs hint
// the jitter is added to.
func (p *Peer) backoff(reason observer.BackoffReason, extra time.Duration) {
	p.set(observer.ConnBackoff)
	var delay time.Duration
	if p.slowCount >= p.opts.SlowAfter && reason == observer.BackoffConnectionBackpressure {
		// §15.1 1011: "连续失败后降为低频并告警，不永久 blocked": half to all of maxBackoffMs.
		if p.slowCount == p.opts.SlowAfter {
			p.log.Warn("replication hub keeps failing with 1011; reconnecting at the slow cadence", slog.Int("failures", p.slowCount))
		}
		half := p.cfg.MaxBackoff / 2
		delay = half + BackoffDelay(p.opts.Rand, half, half, 0)
	} else {
		delay = extra + BackoffDelay(p.opts.Rand, p.cfg.BaseBackoff, p.cfg.MaxBackoff, p.attempt)
	}
	if p.em.Enabled() {
		p.em.Emit(observer.ConnectionBackoffScheduled{Attempt: p.attempt, DelayMs: float64(delay) / float64(time.Millisecond), Reason: reason})
	}
	p.attempt++
	p.timerGen++
	tg := p.timerGen
	p.timer = p.opts.Clock.AfterFunc(delay, func() {
		p.post(func() {
			if tg == p.timerGen && p.state == observer.ConnBackoff {
				p.timer = nil
				p.dial()
			}
		})
	})
}
