package ws

import (
	"github.com/nomicore/nomicore/replication/protocol"
)

// openAdmission limits the OPEN_NAMESPACE requests the hub's namespace layer works on at
// once to maxConcurrentOpens (GUIDE §6). Further OPENs, and every later frame of their
// namespaces, wait in arrival order; more than maxEarlyFrames waiting frames is
// CONNECTION_POLICY_VIOLATION. An OPEN is finished when the handler sends a frame that
// answers it (protocol.AnswersOpen: OPEN_OK or a namespace ERROR). Owner goroutine only.
type openAdmission struct {
	outstanding map[protocol.NamespaceID]int
	total       int
	held        []protocol.Frame
	heldNS      map[protocol.NamespaceID]int
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
