package ws

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// HubOptions configure a Hub.
type HubOptions struct {
	Config     protocol.Config       // validated by NewHub
	InstanceID string                // this hub's instance id (HELLO_ACK's hubInstanceId)
	Auth       Authenticator         // required: verifies bearer tokens before the upgrade
	Namespaces seam.NamespaceFactory // required: the namespace layer of each ready connection
	Clock      clock.Clock           // nil: clock.Real()
	Random     io.Reader             // connection ids; nil: crypto/rand
	Observer   observer.Observer
	Logger     *slog.Logger // nil: discard

	// Admission control (admission.go): while MaxHandshakes connections are in their
	// handshake, or MaxOpening OPEN_NAMESPACE requests are with the namespace layer, across
	// the hub, new upgrades are refused with 503 and a Retry-After of AdmissionRetryAfter
	// (whole seconds). 0 means the defaults (DefaultMaxHandshakes, DefaultMaxOpening,
	// DefaultAdmissionRetry); a negative limit means none.
	MaxHandshakes       int
	MaxOpening          int
	AdmissionRetryAfter time.Duration

	// FrameTap, when set, is called with every message of every connection: by the reader
	// right after a message is read (sent false, before it is decoded) and by the writer
	// after a frame is written (sent true). It runs on those goroutines and must not keep
	// msg or block for long. connectionID is the hub's id of the connection. nil costs
	// nothing.
	FrameTap func(connectionID string, sent bool, msg []byte)
}

// Hub accepts peer connections on /v1/replication
// (docs/protocol.md#transport-and-authentication, docs/protocol.md#hub-connection-states).
// It is an http.Handler: the bearer token is verified before the WebSocket upgrade (401
// missing or invalid token, 403 a known token that is not allowed, no WebSocket in either
// case). Each accepted connection runs its handshake and then its namespace layer, on
// goroutines of its own. Its methods may be called concurrently.
type Hub struct {
	opts HubOptions
	cfg  *protocol.Config
	em   *observer.Emitter
	log  *slog.Logger

	mu       sync.Mutex // guards conns, shutdown
	conns    map[*conn]struct{}
	shutdown bool

	adm     hubAdmission
	running counter // connections whose goroutines have not all exited
	work    counter // admitted namespace work (seam.Session.BeginWork)
	unsub   func()
}

// ErrNoTrustedIdentity is returned by Accept without an authenticated peer identity: a
// wiring bug, never an anonymous or self-declared session.
var ErrNoTrustedIdentity = errors.New("ws: accept without a trusted peer instance id")

// ErrHubShutdown is returned by Accept after Shutdown.
var ErrHubShutdown = errors.New("ws: hub is shut down")

// NewHub validates opts and returns a hub. It subscribes to the authenticator's revocations
// when it offers them (RevocationSource).
func NewHub(opts HubOptions) (*Hub, error) {
	cfg := opts.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !protocol.ValidInstanceID(opts.InstanceID) {
		return nil, fmt.Errorf("ws: hub instance id %q is not ^[a-z][a-z0-9-]{0,62}$", opts.InstanceID)
	}
	if opts.Auth == nil {
		return nil, errors.New("ws: NewHub needs an Authenticator")
	}
	if opts.Namespaces == nil {
		return nil, errors.New("ws: NewHub needs a NamespaceFactory")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Random == nil {
		opts.Random = rand.Reader
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{opts: opts, cfg: &cfg, log: log, conns: make(map[*conn]struct{}),
		em: observer.NewEmitter(observer.SideHub, opts.Observer, opts.Clock)}
	h.adm.maxHandshakes = limitOr(opts.MaxHandshakes, DefaultMaxHandshakes)
	h.adm.maxOpening = limitOr(opts.MaxOpening, DefaultMaxOpening)
	h.adm.retryAfter = opts.AdmissionRetryAfter
	if h.adm.retryAfter <= 0 {
		h.adm.retryAfter = DefaultAdmissionRetry
	}
	if rs, ok := opts.Auth.(RevocationSource); ok {
		h.unsub = rs.SubscribeRevocations(h.revoke)
	}
	return h, nil
}

// limitOr is an admission limit: v, or def for 0; negative (no limit) stays negative.
func limitOr(v, def int) int64 {
	if v == 0 {
		return int64(def)
	}
	return int64(v)
}

func (h *Hub) reject(w http.ResponseWriter, status int, reason observer.AuthRejectReason) {
	if h.em.Enabled() {
		h.em.Emit(observer.AuthUpgradeRejected{Reason: reason})
	}
	http.Error(w, http.StatusText(status), status)
}

// bearerToken extracts the token of "Authorization: Bearer <token>".
func bearerToken(r *http.Request) (string, bool) {
	v := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// ServeHTTP admits, authenticates and upgrades the request: a hub at its admission limits
// answers 503 with Retry-After before anything else. The token is never logged.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	down := h.shutdown
	h.mu.Unlock()
	if down {
		h.reject(w, http.StatusServiceUnavailable, observer.AuthHubShutdown)
		return
	}
	if !h.adm.reserve() {
		if h.em.Enabled() {
			h.em.Emit(observer.AuthUpgradeRejected{Reason: observer.AuthHubBusy})
		}
		h.adm.refuse(w)
		return
	}
	reserved := true
	defer func() {
		if reserved {
			h.adm.release()
		}
	}()
	token, ok := bearerToken(r)
	if !ok {
		h.reject(w, http.StatusUnauthorized, observer.AuthMissingToken)
		return
	}
	// authTimeoutMs bounds the authenticator, through the injected clock.
	ctx, cancel := context.WithCancel(r.Context())
	t := h.opts.Clock.AfterFunc(h.cfg.AuthTimeout, cancel)
	id, err := h.opts.Auth.Authenticate(ctx, token)
	timedOut := ctx.Err() != nil && r.Context().Err() == nil
	t.Stop()
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, auth.ErrUnauthenticated):
		h.reject(w, http.StatusUnauthorized, observer.AuthInvalidCredentials)
		return
	case errors.Is(err, auth.ErrForbidden):
		h.reject(w, http.StatusForbidden, observer.AuthInvalidCredentials)
		return
	case errors.Is(err, auth.ErrVerifierMissing):
		h.reject(w, http.StatusServiceUnavailable, observer.AuthVerifierMissing)
		return
	case timedOut:
		h.reject(w, http.StatusServiceUnavailable, observer.AuthTimeout)
		return
	case r.Context().Err() != nil:
		if h.em.Enabled() {
			h.em.Emit(observer.AuthUpgradeRejected{Reason: observer.AuthPeerDisconnected})
		}
		return
	default:
		h.log.Error("replication authenticator failed", slog.String("error", err.Error()))
		h.reject(w, http.StatusServiceUnavailable, observer.AuthVerifierMissing)
		return
	}
	if !protocol.ValidInstanceID(id.PeerInstanceID) {
		// An accept without a trusted identity is a wiring bug, refused loudly.
		h.log.Error("replication authenticator returned no valid peer instance id; refusing the upgrade")
		h.reject(w, http.StatusInternalServerError, observer.AuthInvalidInstanceID)
		return
	}
	// The socket is corked by the connection's writer (batched writes, cork.go).
	cw := &corkingResponseWriter{ResponseWriter: w}
	c, err := websocket.Accept(cw, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return // Accept wrote the HTTP error
	}
	reserved = false // the connection holds the slot now, until its handshake ends
	if err := h.accept(newWSTransport(c, cw.conn, h.cfg.CloseTimeout), id); err != nil {
		_ = c.Close(websocket.StatusGoingAway, "") // best effort: the upgrade is refused either way
		if errors.Is(err, ErrHubShutdown) && h.em.Enabled() {
			h.em.Emit(observer.AuthUpgradeRejected{Reason: observer.AuthHubShutdown})
		}
	}
}

// Accept runs a connection on an established transport for an authenticated peer. Most
// callers use ServeHTTP; tests pass a fake transport. Without a valid trusted identity it
// logs and returns ErrNoTrustedIdentity and leaves t open.
// Accept does not apply the admission limits, but its connections count in them.
func (h *Hub) Accept(t Transport, id auth.PeerIdentity) error {
	h.adm.handshakes.Add(1)
	return h.accept(t, id)
}

// accept runs a connection that holds a handshake slot of the admission control: the slot
// is given back when the handshake completes or the connection closes, or at once when
// accept fails.
func (h *Hub) accept(t Transport, id auth.PeerIdentity) error {
	if !protocol.ValidInstanceID(id.PeerInstanceID) {
		h.adm.release()
		h.log.Error("replication accept without a trusted peer instance id")
		return ErrNoTrustedIdentity
	}
	connID, err := h.newConnectionID()
	if err != nil {
		h.adm.release()
		return err
	}
	handshaking := true // owner goroutine
	endHandshake := func() {
		if handshaking {
			handshaking = false
			h.adm.release()
		}
	}
	c := newConn(connParams{
		side: observer.SideHub, cfg: h.cfg, clock: h.opts.Clock, em: h.em, log: h.log, t: t,
		factory: h.opts.Namespaces, auth: h.opts.Auth, peerID: id.PeerInstanceID, hubID: h.opts.InstanceID,
		connID: connID, work: &h.work, tap: h.opts.FrameTap,
		onReady: func(*conn) { endHandshake() },
		onClosed: func(c *conn, _ seam.CloseInfo) {
			endHandshake()
			c.opens.closed()
		},
		onExit: func(c *conn) {
			h.mu.Lock()
			delete(h.conns, c)
			h.mu.Unlock()
			h.running.done()
		},
		onUpgrade: func(r observer.AuthRejectReason) {
			if h.em.Enabled() {
				h.em.Emit(observer.AuthUpgradeRejected{Reason: r})
			}
		},
	})
	c.opens.hubWide = &h.adm.opening
	h.mu.Lock()
	if h.shutdown {
		h.mu.Unlock()
		h.adm.release()
		return ErrHubShutdown
	}
	h.conns[c] = struct{}{}
	h.running.add()
	h.mu.Unlock()
	c.start()
	return nil
}

func (h *Hub) newConnectionID() (string, error) {
	var b [8]byte
	if _, err := io.ReadFull(h.opts.Random, b[:]); err != nil {
		return "", fmt.Errorf("ws: connection id: %w", err)
	}
	return "c-" + hex.EncodeToString(b[:]), nil
}

func (h *Hub) each(f func(*conn)) {
	h.mu.Lock()
	cs := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		cs = append(cs, c)
	}
	h.mu.Unlock()
	for _, c := range cs {
		f(c)
	}
}

// GoAway drains every ready connection: a GOAWAY with reasonCode (for example
// protocol.GoAwayServerRestarting), drainTimeout, and retryAfter when hasRetryAfter. Each
// connection closes with 1001 when its namespaces are all terminal or at the deadline.
func (h *Hub) GoAway(reason string, drainTimeout, retryAfter time.Duration, hasRetryAfter bool) {
	h.each(func(c *conn) {
		c.post(func() { c.goAway(reason, drainTimeout, retryAfter, hasRetryAfter) })
	})
}

// revoke applies an authenticator revocation (docs/protocol.md#authorization): revoked
// namespaces go to the namespace layer; a whole-peer revocation drains the peer's
// connections with GOAWAY REAUTH_REQUIRED (closeTimeoutMs).
func (h *Hub) revoke(r auth.PeerRevocation) {
	h.each(func(c *conn) {
		if c.peerID != r.PeerInstanceID {
			return
		}
		c.post(func() {
			switch {
			case c.closing:
			case c.state != stReady && c.state != stDraining:
				c.closeNow(protocol.ClosePolicy, seam.CloseInfo{Code: protocol.ClosePolicy, Cause: seam.CauseShutdown})
			case len(r.Namespaces) == 0:
				c.goAway(protocol.GoAwayReauthRequired, h.cfg.CloseTimeout, 0, false)
			default:
				c.handler.HandleRevoked(r)
			}
		})
	})
}

// Shutdown stops the replication service as docs/protocol.md#restart-and-shutdown has it
// for the hub: new upgrades are refused, every connection's epoch ends and its output stops,
// and its transport closes with 1001 without a GOAWAY; Shutdown waits for the connections to
// finish and for admitted namespace work (seam.Session.BeginWork) to drain, or for ctx. It
// is idempotent. An observer calls it from a goroutine of its own: events are delivered on
// the connection goroutines Shutdown waits for.
func (h *Hub) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	first := !h.shutdown
	h.shutdown = true
	h.mu.Unlock()
	if first && h.unsub != nil {
		h.unsub()
	}
	h.each(func(c *conn) {
		c.w.stopOutput()
		c.post(func() {
			c.closeNow(protocol.CloseGoingAway, seam.CloseInfo{Code: protocol.CloseGoingAway, Cause: seam.CauseShutdown})
		})
	})
	for _, c := range []*counter{&h.running, &h.work} {
		select {
		case <-c.zero():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Admission reads the hub's admission control (any goroutine).
func (h *Hub) Admission() AdmissionStats {
	rh, ro := h.adm.refusedHandshakes.Load(), h.adm.refusedOpening.Load()
	return AdmissionStats{Handshakes: h.adm.handshakes.Load(), Opening: h.adm.opening.Load(), Refused: rh + ro,
		RefusedAtHandshakes: rh, RefusedAtOpening: ro}
}

// Load sums the outbound load of every connection (any goroutine).
func (h *Hub) Load() Load {
	var l Load
	h.each(l.add)
	return l
}

// Connections lists the hub's connections.
func (h *Hub) Connections() []ConnStatus {
	var out []ConnStatus
	h.each(func(c *conn) { out = append(out, c.status()) })
	return out
}
