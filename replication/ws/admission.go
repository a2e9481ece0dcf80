package ws

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/replication/protocol"
)

// Admission control before the upgrade. After an outage every peer reconnects within a few
// seconds, and each connection costs the hub a handshake and then, per namespace, an OPEN
// (a lease on the document, a bootstrap or a reconciliation). The hub bounds that work
// across all its connections: while MaxHandshakes connections are between their upgrade and
// their HELLO_ACK, or MaxOpening OPEN_NAMESPACE requests are with the namespace layer, a new
// upgrade is refused with 503 and a Retry-After, before the token is checked — nothing
// waits in a queue. The peers honour Retry-After with jitter (Peer), so a reconnect storm
// spreads itself over the time the hub needs.

// Admission defaults (HubOptions).
const (
	DefaultMaxHandshakes  = 256
	DefaultMaxOpening     = 256
	DefaultAdmissionRetry = time.Second
)

// hubAdmission counts the hub's connections in their handshake and the OPENs in progress,
// across connections. Any goroutine.
type hubAdmission struct {
	maxHandshakes, maxOpening int64 // ≤ 0: no limit
	retryAfter                time.Duration
	handshakes                atomic.Int64
	opening                   atomic.Int64
	refusedHandshakes         atomic.Int64 // refused at maxHandshakes
	refusedOpening            atomic.Int64 // refused at maxOpening
}

// reserve takes a handshake slot for an upgrade, or reports that the hub is busy.
func (a *hubAdmission) reserve() bool {
	if a.maxOpening > 0 && a.opening.Load() >= a.maxOpening {
		a.refusedOpening.Add(1)
		return false
	}
	n := a.handshakes.Add(1)
	if a.maxHandshakes > 0 && n > a.maxHandshakes {
		a.handshakes.Add(-1)
		a.refusedHandshakes.Add(1)
		return false
	}
	return true
}

// release gives back a handshake slot.
func (a *hubAdmission) release() { a.handshakes.Add(-1) }

// refuse answers an upgrade the hub is too busy for: 503 with Retry-After.
func (a *hubAdmission) refuse(w http.ResponseWriter) {
	secs := int64((a.retryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	http.Error(w, "the hub is busy admitting other peers; retry after the delay in Retry-After", http.StatusServiceUnavailable)
}

// RetryAfter reads a response's Retry-After in delay-seconds (an HTTP date is ignored: the
// peer then backs off as usual); 0 when there is none. It is bounded to an hour.
func RetryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// AdmissionStats is a reading of the hub's admission control.
type AdmissionStats struct {
	Handshakes int64 // connections between upgrade and HELLO_ACK
	Opening    int64 // OPEN_NAMESPACE requests with the namespace layer
	Refused    int64 // upgrades refused with 503 since the hub started
	// RefusedAtHandshakes and RefusedAtOpening split Refused by the limit that was reached.
	RefusedAtHandshakes, RefusedAtOpening int64
}

// openAdmission limits the OPEN_NAMESPACE requests the hub's namespace layer works on at
// once to maxConcurrentOpens (docs/protocol.md#hub-checks). Further OPENs, and every later
// frame of their namespaces, wait in arrival order; more than maxEarlyFrames waiting frames
// is CONNECTION_POLICY_VIOLATION. An OPEN is finished when the handler sends a frame that
// answers it (protocol.AnswersOpen: OPEN_OK or a namespace ERROR). Owner goroutine only. On
// the hub, each OPEN it works on also counts in hubWide (hubAdmission.opening).
type openAdmission struct {
	outstanding map[protocol.NamespaceID]int
	total       int
	held        []protocol.Frame
	heldNS      map[protocol.NamespaceID]int
	hubWide     *atomic.Int64
}

// frameNamespace is the namespace a frame is for.
func frameNamespace(f protocol.Frame) protocol.NamespaceID {
	if m, ok := f.Message.(protocol.NamespaceMessage); ok {
		return m.Namespace()
	}
	return protocol.NamespaceID{}
}

// admit reports whether f goes to the handler now; a frame that must wait is held.
func (a *openAdmission) admit(c *conn, f protocol.Frame) bool {
	ns := frameNamespace(f)
	open := f.Type() == protocol.TypeOpenNamespace
	if len(a.held) > 0 && (open || a.heldNS[ns] > 0) || open && a.total >= c.cfg.MaxConcurrentOpens {
		if len(a.held) >= c.cfg.MaxEarlyFrames {
			c.fail(frameErr(protocol.CodeConnectionPolicyViolation, f, "too many frames waiting for OPEN admission"))
			return false
		}
		if a.heldNS == nil {
			a.heldNS = make(map[protocol.NamespaceID]int)
		}
		a.held = append(a.held, f)
		a.heldNS[ns]++
		return false
	}
	if open {
		a.start(ns)
	}
	return true
}

// start counts an OPEN the handler is now working on.
func (a *openAdmission) start(ns protocol.NamespaceID) {
	if a.outstanding == nil {
		a.outstanding = make(map[protocol.NamespaceID]int)
	}
	a.outstanding[ns]++
	a.total++
	if a.hubWide != nil {
		a.hubWide.Add(1)
	}
}

// closed gives back the hub-wide count of the OPENs the closed connection never answered.
func (a *openAdmission) closed() {
	if a.hubWide != nil {
		a.hubWide.Add(int64(-a.total))
	}
	a.outstanding, a.total = nil, 0
}

// answered records an OPEN_OK or namespace ERROR sent for ns.
func (a *openAdmission) answered(c *conn, ns protocol.NamespaceID) {
	if a.outstanding[ns] == 0 {
		return
	}
	if a.outstanding[ns]--; a.outstanding[ns] == 0 {
		delete(a.outstanding, ns)
	}
	a.total--
	if a.hubWide != nil {
		a.hubWide.Add(-1)
	}
	if len(a.held) > 0 {
		c.defer_(func() { a.release(c) })
	}
}

// release hands the held frames to the handler, in order, while the limit allows.
func (a *openAdmission) release(c *conn) {
	for len(a.held) > 0 && !c.closing {
		f := a.held[0]
		open := f.Type() == protocol.TypeOpenNamespace
		if open && a.total >= c.cfg.MaxConcurrentOpens {
			return
		}
		a.held[0] = protocol.Frame{}
		a.held = a.held[1:]
		ns := frameNamespace(f)
		if a.heldNS[ns]--; a.heldNS[ns] == 0 {
			delete(a.heldNS, ns)
		}
		if c.state == stDraining && f.Type().Rule().StartsWork {
			c.drainDrop(f)
			continue
		}
		if open {
			a.start(ns)
		}
		c.handler.HandleFrame(f)
	}
}
