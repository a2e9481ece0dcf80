package yws

import (
	"context"
	"errors"
	"log/slog"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// editor is one editor in a namespace's room on this node, whichever endpoint it came
// through: a y-websocket connection (conn), or one document of a Hocuspocus socket
// (hocusDoc). The room relays updates, awareness and stateless messages to its editors
// through it, and the node's token checks reach it through it.
type editor interface {
	// send queues a message for the editor — y-protocols framing, varUint type · payload,
	// which a Hocuspocus document puts after its address; it never blocks.
	send(msg []byte)
	// closeWith ends the editor with a WebSocket status and a reason; the first call wins.
	// A Hocuspocus document closes alone on a status that says the editor cannot go on
	// (bad input, a limit, its credential), and closes its socket on one that asks the
	// provider to reconnect (the node cannot write now, is shutting down, reset the
	// namespace).
	closeWith(code websocket.StatusCode, reason, cause string)
	// credential is the grant the editor was admitted with (its name is the logs'; the
	// node's token checks recheck it); setReadOnly applies a change of it.
	credential() auth.ClientGrant
	setReadOnly(readOnly bool)
	// wantsSaved reports whether the editor is told when each of its updates is durable
	// (a Hocuspocus provider counts its unsaved changes), and saved tells it, in order.
	wantsSaved() bool
	saved()
	// takesStateless reports whether stateless messages are relayed to the editor.
	takesStateless() bool
	// describe says who the editor is, for the admin API and the dashboard.
	describe() Editor
}

// applyOutcome is the sequencer's answer to a write.
type applyOutcome struct {
	res registry.ApplyResult
	err error
}

// writeDoor is one editor's way into its namespace's write sequencer, shared by both
// endpoints: the read-only check, the gaps refused updates leave, the node's WriteGate, the
// apply, and the relay of what was applied to the room's other editors once it is durable
// (with the editor's own saved acknowledgement, if it wants one). It is owned by the
// editor's reader, which writes one update at a time: a refusal must be known before the
// next update, which may build on it.
type writeDoor struct {
	srv  *Server
	room *room
	ed   editor
	ctx  context.Context // the editor's: waits end when it closes

	readOnly func() bool
	gaps     map[uint64]uint64 // Yjs client id → the first clock of a refused update of it
	result   chan applyOutcome // cap 1: the sequencer's answer to the write in flight
}

func newWriteDoor(s *Server, rm *room, ed editor, ctx context.Context, readOnly func() bool) writeDoor {
	return writeDoor{srv: s, room: rm, ed: ed, ctx: ctx, readOnly: readOnly, result: make(chan applyOutcome, 1)}
}

// writeVerdict is what became of one update.
type writeVerdict struct {
	// ok is false when the editor was closed (bad input, the node cannot write now): its
	// reader stops.
	ok bool
	// refused names why the update was not applied (read-only, protected-meta,
	// after-refused, too-large; empty: it was taken), and text says it in the editor's
	// words.
	refused, text string
}

// write takes an editor's update — a SyncStep2 (step2) or an Update — carried by msg, its
// sync message in y-protocols framing (msg[1] is the sub-type, rewritten to Update when it
// is relayed). What changed the document is relayed to the room's other editors once
// durable.
func (w *writeDoor) write(update, msg []byte, step2 bool) writeVerdict {
	if w.readOnly() {
		if step2 {
			// The provider's answer to the node's SyncStep1: refused only when it brings
			// something new (a reconnecting reader's diff repeats what the node has).
			included, err := w.included(update)
			if err != nil {
				return writeVerdict{ok: w.failed(err)}
			}
			if included {
				return writeVerdict{ok: w.savedNow()}
			}
		}
		w.srv.m.refused("read-only")
		return writeVerdict{ok: true, refused: "read-only", text: "this client token is read-only: document changes are not applied"}
	}
	if len(w.gaps) > 0 {
		_, to, err := yjs.UpdateRanges(update)
		if err != nil {
			w.badInput(err.Error(), "malformed update")
			return writeVerdict{}
		}
		for client, end := range to {
			if g, ok := w.gaps[client]; ok && end > g {
				// It builds on a refused update: it could only wait as pending structs in
				// the document, forever. Nothing of it is kept.
				w.srv.m.refused("after-refused")
				return writeVerdict{ok: true, refused: "after-refused", text: "an earlier change of this editor was refused; reload the editor to go on"}
			}
		}
	}
	if g := w.srv.opts.Writes; g != nil {
		if err := g.AdmitWrite(w.room.ns, len(update)); err != nil {
			return w.gateRefused(update, err)
		}
	}
	o, ok := w.apply(update)
	if !ok {
		return writeVerdict{}
	}
	switch {
	case o.err == nil:
		var counted func(context.Context) error
		if o.res.Changed && w.srv.opts.Writes != nil {
			counted = w.srv.opts.Writes.Written(w.room.ns, len(update))
		}
		if !o.res.Changed {
			return writeVerdict{ok: w.savedNow()}
		}
		if o.res.Seq == 0 && w.ed.wantsSaved() {
			// Applied, but the store refused the append: the change waits for a snapshot,
			// and the editor may not hear it is saved. It reconnects and its resync waits
			// again (savedNow) until the snapshot holds it.
			w.srv.log.Warn("editor update applied but not saved yet (the store is busy); closed so the editor learns when it is",
				slog.String("client", w.ed.credential().Name), slog.String("namespaceId", w.room.ns))
			w.ed.closeWith(websocket.StatusTryAgainLater, "the node cannot save changes now; reconnecting later resends them", "not-saved")
			return writeVerdict{}
		}
		if step2 {
			msg[1] = SyncUpdate // relayed as a live update (both sub-types are one byte)
		}
		if err := w.room.relay(w.ctx, relayItem{seq: o.res.Seq, counted: counted, msg: msg, update: update, from: w.ed, ack: w.ed.wantsSaved()}); err != nil {
			return writeVerdict{}
		}
		return writeVerdict{ok: true}
	case errors.Is(o.err, registry.ErrProtected):
		from, _, _ := yjs.UpdateRanges(update) // decoded by the apply already
		w.srv.log.Warn("editor update refused: it changes the protected meta map", slog.String("client", w.ed.credential().Name),
			slog.String("namespaceId", w.room.ns))
		return w.refuseUpdate(from, "protected-meta", "an update that changes the protected root map meta was refused; nothing of it was applied — reload the editor to go on")
	}
	return writeVerdict{ok: w.failed(o.err)}
}

// savedNow acknowledges, to an editor that wants it, an update that brought nothing to
// write: once the document as it is now is durable (what the update carries may have come
// moments before from another writer, not saved yet). A document whose changes wait for a
// snapshot closes the editor with 1013, as a write the store refused does.
func (w *writeDoor) savedNow() bool {
	if !w.ed.wantsSaved() {
		return true
	}
	type res struct {
		p   registry.SavePoint
		err error
	}
	ch := make(chan res, 1)
	if err := w.room.lease.SavePointAsync(func(p registry.SavePoint, err error) { ch <- res{p, err} }); err != nil {
		return w.failed(err)
	}
	var r res
	select {
	case r = <-ch:
	case <-w.ctx.Done():
		return false
	}
	switch {
	case r.err != nil:
		return w.failed(r.err)
	case r.p.Unsaved:
		w.ed.closeWith(websocket.StatusTryAgainLater, "the node cannot save changes now; reconnecting later resends them", "not-saved")
		return false
	}
	return w.room.relay(w.ctx, relayItem{seq: r.p.Seq, from: w.ed, ack: true}) == nil
}

// refuseUpdate refuses one update whose structs start at from (Yjs client id → first
// clock): the clocks it leaves out become gaps (later updates that reach past them are
// dropped). Too many gaps close the editor.
func (w *writeDoor) refuseUpdate(from map[uint64]uint64, reason, text string) writeVerdict {
	for client, clk := range from {
		if g, ok := w.gaps[client]; !ok || clk < g {
			if w.gaps == nil {
				w.gaps = map[uint64]uint64{}
			}
			w.gaps[client] = clk
		}
	}
	w.srv.m.refused(reason)
	if len(w.gaps) > w.srv.opts.MaxGapClients {
		w.ed.closeWith(websocket.StatusPolicyViolation, "too many refused updates", "too-many-refused")
		return writeVerdict{}
	}
	return writeVerdict{ok: true, refused: reason, text: text}
}

// gateRefused handles an update the node's WriteGate refused: one too large for the
// connection to the hub is refused alone; otherwise the replica cannot take writes now and
// the editor is closed with 1013 (the provider reconnects; its resync carries the update
// once the replica takes writes again, and until then the editor is refused).
func (w *writeDoor) gateRefused(update []byte, err error) writeVerdict {
	name := w.ed.credential().Name
	if errors.Is(err, ErrUpdateTooLarge) {
		from, _, derr := yjs.UpdateRanges(update)
		if derr != nil {
			w.badInput(derr.Error(), "malformed update")
			return writeVerdict{}
		}
		w.srv.log.Warn("editor update refused: larger than the connection to the hub carries", slog.String("client", name),
			slog.String("namespaceId", w.room.ns), slog.Int("bytes", len(update)), slog.String("error", err.Error()))
		return w.refuseUpdate(from, "too-large", err.Error()+"; nothing of it was applied — reload the editor to go on")
	}
	w.srv.log.Warn("editor update refused: the replica cannot replicate it now; closed so the editor retries later",
		slog.String("client", name), slog.String("namespaceId", w.room.ns), slog.String("error", err.Error()))
	w.ed.closeWith(websocket.StatusTryAgainLater, "the replica cannot take changes now; reconnecting later resends them", "replica-failed")
	return writeVerdict{}
}

// badInput closes the editor for an update it cannot take (1007), with a log line.
func (w *writeDoor) badInput(detail, reason string) {
	w.srv.log.Warn("editor sent a bad message; closed", slog.String("client", w.ed.credential().Name),
		slog.String("namespaceId", w.room.ns), slog.Int("closeStatus", int(websocket.StatusInvalidFramePayloadData)), slog.String("error", detail))
	w.ed.closeWith(websocket.StatusInvalidFramePayloadData, reason, "bad-message")
}

// failed closes the editor after a sequencer error, with the status that tells the
// provider what to do: malformed input 1007; the node busy or degraded 1013 (it
// reconnects, and the resync carries the update again); anything else 1011. It returns
// false (the editor's reader stops).
func (w *writeDoor) failed(err error) bool {
	name := w.ed.credential().Name
	switch {
	case errors.Is(err, registry.ErrApplyFailed):
		w.badInput(err.Error(), "malformed update")
	case errors.Is(err, registry.ErrDeleted):
		// Deleted while this editor wrote or read: as when the room hears of it.
		w.ed.closeWith(statusDeleted, "the namespace was deleted", "namespace-deleted")
	case errors.Is(err, registry.ErrDegraded):
		w.srv.log.Warn("editor update refused: persistence is degraded; closed so the editor retries", slog.String("client", name),
			slog.String("namespaceId", w.room.ns))
		w.ed.closeWith(websocket.StatusTryAgainLater, "the node cannot save changes now; reconnecting later resends them", "degraded")
	case errors.Is(err, registry.ErrOverloaded):
		w.srv.log.Warn("editor update refused: the namespace's write queue is full; closed so the editor retries", slog.String("client", name),
			slog.String("namespaceId", w.room.ns))
		w.ed.closeWith(websocket.StatusTryAgainLater, "the node is busy; reconnecting later resends the changes", "overloaded")
	case w.ctx.Err() != nil:
	default:
		w.srv.log.Error("editor update failed", slog.String("client", name), slog.String("namespaceId", w.room.ns),
			slog.String("error", err.Error()))
		w.ed.closeWith(websocket.StatusInternalError, "internal error; reconnect", "internal")
	}
	return false
}

// apply submits one update and waits for the sequencer's answer.
func (w *writeDoor) apply(update []byte) (applyOutcome, bool) {
	err := w.room.lease.WriteLocalExceptAsync(w.room.watch.Load(), update, func(r registry.ApplyResult, err error) {
		w.result <- applyOutcome{r, err}
	})
	if err != nil {
		return applyOutcome{err: err}, true
	}
	select {
	case o := <-w.result:
		return o, true
	case <-w.ctx.Done():
		return applyOutcome{}, false
	}
}

// included reports whether the document holds everything update carries.
func (w *writeDoor) included(update []byte) (bool, error) {
	type res struct {
		ok  bool
		err error
	}
	ch := make(chan res, 1)
	if err := w.room.lease.IncludedAsync(update, func(ok bool, err error) { ch <- res{ok, err} }); err != nil {
		return false, err
	}
	select {
	case r := <-ch:
		return r.ok, r.err
	case <-w.ctx.Done():
		return false, w.ctx.Err()
	}
}
