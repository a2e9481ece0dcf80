package yws

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// Bounds of a room's registry watch (the updates that reach the namespace from elsewhere:
// replication, the admin API), larger than a replication session's: the room's pump only
// moves them to the editors' send queues.
const (
	watchQueueBytes = 16 << 20
	watchQueueCount = 4096
)

// room is one namespace with editors on this node. It holds a lease (the document stays
// loaded while an editor is connected) and a registry watch, and relays to its editors:
//
//   - updates applied from elsewhere (replication, the admin API), as the watch delivers
//     them — by the pump goroutine;
//   - each editor's own accepted updates to the other editors, once the store has made them
//     durable (on a hub cluster node: stored on a quorum and applied from the log) — by the
//     relay goroutine (so whatever an editor sees survives a crash of the node); the
//     writer's watch skips them (registry.Lease.WriteLocalExceptAsync);
//   - awareness among its editors, and with other nodes through its Presence link when the
//     node has one.
type room struct {
	srv   *Server
	ns    string
	owner string

	ready   chan struct{} // closed once open finished; openErr is then set
	openErr error
	refs    int // connections and joiners holding the room; guarded by srv.mu

	lease  *registry.Lease
	watch  atomic.Pointer[registry.Watch] // replaced after an overflow (resync)
	ctx    context.Context                // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex // guards conns, aware, presence and the awareness relay's fields
	conns    map[editor]struct{}
	aware    *awareness
	presence PresenceLink // nil without Options.Presence, and once closed
	closed   bool         // the room closed: other nodes' states are no longer taken
	// The awareness relay: changes wait in awarePending while a relay went out less than
	// awarenessRelayInterval ago, and go out together when awareTimer fires.
	awarePending map[uint64]AwarenessEntry // by client id: its latest change
	awareFrom    editor                    // the editor every pending change came from, if one did
	awareOneFrom bool                      // whether awareFrom is that editor
	awareLast    time.Time                 // when the last relay went out
	awareTimer   clock.Timer               // set while a relay waits

	relayMu    sync.Mutex // guards relayQ and relayBytes
	relayQ     []relayItem
	relayBytes int
	relayWake  chan struct{} // cap 1: relayQ became non-empty
	relaySpace chan struct{} // cap 1: relayBytes went down
}

// relayItem is an editor's accepted update waiting to be durable (seq) before it is sent
// to the room's other editors: msg is the sync Update message carrying update (nil: the
// update changed nothing, and only its acknowledgement waits). With ack, from is told once
// it is durable (editor.saved). On a peer, counted waits for the update's count of local
// writes to be durable too (WriteGate.Written).
type relayItem struct {
	seq     uint64
	counted func(context.Context) error
	msg     []byte
	update  []byte
	from    editor
	ack     bool
}

// cost is what an item counts against RelayQueueBytes: its message, and at least
// ackOnlyCost, so that acknowledgements alone are bounded too.
func (it relayItem) cost() int { return max(len(it.msg), ackOnlyCost) }

const ackOnlyCost = 64

func newRoom(s *Server, ns, owner string) *room {
	return &room{srv: s, ns: ns, owner: owner, ready: make(chan struct{}), conns: map[editor]struct{}{},
		aware:     newAwareness(s.opts.MaxAwarenessStates, s.opts.Limits.AwarenessStatesPerConnection),
		relayWake: make(chan struct{}, 1), relaySpace: make(chan struct{}, 1)}
}

// open takes the lease and the watch and starts the room's goroutines.
func (rm *room) open(ctx context.Context) error {
	l, err := rm.srv.opts.Registry.Open(ctx, rm.owner, rm.ns)
	if err != nil {
		return err
	}
	w, err := l.Watch(watchQueueBytes, watchQueueCount)
	if err != nil {
		l.Release()
		return err
	}
	rm.lease = l
	rm.watch.Store(w)
	rm.ctx, rm.cancel = context.WithCancel(context.Background())
	rm.wg.Add(2)
	go rm.pump()
	go rm.relayLoop()
	if p := rm.srv.opts.Presence; p != nil {
		link := p.Join(rm.owner, rm.ns, remoteStates{rm})
		rm.mu.Lock()
		rm.presence = link
		rm.mu.Unlock()
	}
	return nil
}

// close stops the goroutines and releases the watch and the lease (after the last
// connection left).
func (rm *room) close() {
	if rm.lease == nil {
		return
	}
	rm.mu.Lock()
	if rm.awareTimer != nil {
		rm.awareTimer.Stop()
	}
	link := rm.presence
	rm.presence = nil
	rm.mu.Unlock()
	if link != nil {
		link.Close()
	}
	// Other nodes' states stay in the table after the last editor left: they leave with the
	// room (and the gauge), and nothing is taken any more.
	rm.mu.Lock()
	rm.closed = true
	rm.srv.m.awarenessChanged(-len(rm.aware.states))
	clear(rm.aware.states)
	rm.mu.Unlock()
	rm.cancel()
	rm.wg.Wait()
	rm.watch.Load().Close()
	rm.lease.Release()
}

// add registers c and returns the awareness states to greet it with, taken under the same
// lock, so that c then hears every later change.
func (rm *room) add(c editor) []AwarenessEntry {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.conns[c] = struct{}{}
	return rm.aware.all()
}

// remove unregisters c and announces the removal of the awareness states it controlled.
func (rm *room) remove(c editor) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if _, ok := rm.conns[c]; !ok {
		return
	}
	delete(rm.conns, c)
	if gone, local := rm.aware.removeHolder(holder{conn: c}, rm.srv.opts.Clock.Now()); len(gone) > 0 {
		rm.srv.m.awarenessChanged(-len(gone))
		rm.relayAwarenessLocked(gone, nil)
		rm.publishLocked(local)
	}
}

// members lists the room's editors.
func (rm *room) members() []editor {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	out := make([]editor, 0, len(rm.conns))
	for c := range rm.conns {
		out = append(out, c)
	}
	return out
}

// waitEmpty waits (bounded) until every editor left.
func (rm *room) waitEmpty(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		rm.mu.Lock()
		n := len(rm.conns)
		rm.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// broadcastLocked queues msg to every editor but except.
func (rm *room) broadcastLocked(msg []byte, except editor) {
	for c := range rm.conns {
		if c != except {
			c.send(msg)
		}
	}
}

func (rm *room) broadcastAwarenessLocked(entries []AwarenessEntry, except editor) {
	msg := AppendAwareness(nil, AppendAwarenessUpdate(nil, entries))
	rm.broadcastLocked(msg, except)
}

// awarenessRelayInterval is the shortest time between two awareness relays of a room:
// changes that come faster go out together, each client's latest only. An editor
// therefore hears at most 20 awareness messages a second from the node however many
// editors move their cursors, or however fast one of them floods — and a provider repeats
// every awareness change it hears, so this also bounds what the provider sends back.
const awarenessRelayInterval = 50 * time.Millisecond

// relayAwarenessLocked relays awareness changes made by from (nil: by the node) to the
// room's editors: at once when no relay went out within awarenessRelayInterval, else with
// the next relay. A relay goes to every editor but the one connection all its changes came
// from (with changes of several connections, each gets its own back, which y-protocols
// ignores: the clock is not newer).
func (rm *room) relayAwarenessLocked(entries []AwarenessEntry, from editor) {
	now := rm.srv.opts.Clock.Now()
	if rm.awareTimer == nil && now.Sub(rm.awareLast) >= awarenessRelayInterval {
		rm.awareLast = now
		rm.broadcastAwarenessLocked(entries, from)
		return
	}
	if len(rm.awarePending) == 0 {
		rm.awareFrom, rm.awareOneFrom = from, true
		if rm.awarePending == nil {
			rm.awarePending = map[uint64]AwarenessEntry{}
		}
	} else if from != rm.awareFrom {
		rm.awareOneFrom = false
	}
	for _, e := range entries {
		rm.awarePending[e.ClientID] = e
	}
	if rm.awareTimer == nil {
		rm.awareTimer = rm.srv.opts.Clock.AfterFunc(awarenessRelayInterval-now.Sub(rm.awareLast), rm.flushAwareness)
	}
}

// flushAwareness sends the pending awareness changes (awareTimer).
func (rm *room) flushAwareness() {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.awareTimer = nil
	if len(rm.awarePending) == 0 {
		return
	}
	entries := make([]AwarenessEntry, 0, len(rm.awarePending))
	for _, e := range rm.awarePending {
		entries = append(entries, e)
	}
	var except editor
	if rm.awareOneFrom {
		except = rm.awareFrom
	}
	clear(rm.awarePending)
	rm.awareFrom = nil
	rm.awareLast = rm.srv.opts.Clock.Now()
	rm.broadcastAwarenessLocked(entries, except)
}

// applyAwareness takes an awareness update from c and relays what it changed to the other
// editors. The gauge of awareness states moves before the relay, so that whoever sees a
// relayed state sees it counted.
func (rm *room) applyAwareness(c editor, entries []AwarenessEntry) (dropped int) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	before := len(rm.aware.states)
	taken, dropped := rm.aware.apply(holder{conn: c}, entries, rm.srv.opts.Clock.Now())
	rm.srv.m.awarenessChanged(len(rm.aware.states) - before)
	if len(taken) > 0 {
		rm.relayAwarenessLocked(taken, c)
		rm.publishLocked(taken)
	}
	return dropped
}

// relayStateless sends a stateless message to the room's editors that take them, but from
// (nil: from the node's admin API). Stateless messages are not stored: an editor that is
// not connected now never hears them. It returns how many editors it was sent to.
func (rm *room) relayStateless(payload string, from editor) int {
	msg := AppendStateless(nil, payload)
	rm.mu.Lock()
	defer rm.mu.Unlock()
	n := 0
	for c := range rm.conns {
		if c != from && c.takesStateless() {
			c.send(msg)
			n++
		}
	}
	return n
}

// awarenessMessage returns every awareness state of the room as one awareness message: the
// answer to an editor's queryAwareness.
func (rm *room) awarenessMessage() []byte {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return AppendAwareness(nil, AppendAwarenessUpdate(nil, rm.aware.all()))
}

// pump relays the updates of the watch and expires awareness states.
func (rm *room) pump() {
	defer rm.wg.Done()
	tick := clock.NewTicker(rm.srv.opts.Clock, rm.srv.opts.AwarenessTimeout/10)
	defer tick.Stop()
	for {
		w := rm.watch.Load()
		select {
		case <-rm.ctx.Done():
			return
		case <-tick.C:
			rm.mu.Lock()
			if gone, local := rm.aware.expire(rm.srv.opts.Clock.Now(), rm.srv.opts.AwarenessTimeout); len(gone) > 0 {
				rm.srv.m.awarenessChanged(-len(gone))
				rm.relayAwarenessLocked(gone, nil)
				rm.publishLocked(local)
			}
			rm.mu.Unlock()
			continue
		case <-w.Wake():
		}
		p := w.Poll()
		if len(p.Updates) > 0 {
			var msg []byte
			if len(p.Updates) > 1 {
				updates := make([][]byte, len(p.Updates))
				for i, u := range p.Updates {
					updates[i] = u.Bytes()
				}
				msg = rm.mergedMessage(updates, p.Updates)
			}
			rm.mu.Lock()
			if msg != nil {
				rm.broadcastLocked(msg, nil)
			} else {
				for _, u := range p.Updates {
					rm.broadcastLocked(AppendSync(nil, SyncUpdate, u.Bytes()), nil)
				}
			}
			rm.mu.Unlock()
		}
		switch {
		case p.Deleted:
			rm.closeAll(statusDeleted, "the namespace was deleted", "namespace-deleted")
			return
		case p.Failed:
			rm.closeAll(websocket.StatusInternalError, "the document failed on this node; reconnect", "document-failed")
			return
		case p.Closed:
			rm.closeAll(websocket.StatusGoingAway, "the namespace was unloaded on this node; reconnect", "namespace-unloaded")
			return
		case p.NeedsResync:
			if !rm.resync() {
				return
			}
		}
	}
}

// resync replaces a watch that overflowed and sends every editor the whole document (Yjs
// applies what it already has as a no-op), so nothing the dropped updates carried is lost.
func (rm *room) resync() bool {
	nw, err := rm.lease.Watch(watchQueueBytes, watchQueueCount)
	if err == nil {
		rm.watch.Swap(nw).Close()
		var state []byte
		if state, err = rm.lease.EncodeState(rm.ctx, nil); err == nil {
			rm.srv.log.Warn("editor relay fell behind the namespace's updates; sent every editor the whole document",
				slog.String("namespaceId", rm.ns))
			rm.mu.Lock()
			rm.broadcastLocked(AppendSync(nil, SyncUpdate, state), nil)
			rm.mu.Unlock()
			return true
		}
	}
	if rm.ctx.Err() == nil {
		rm.srv.log.Error("editor relay cannot resync; closing the namespace's editors", slog.String("namespaceId", rm.ns),
			slog.String("error", err.Error()))
		rm.closeAll(websocket.StatusInternalError, "the node cannot relay this namespace now; reconnect", "resync-failed")
	}
	return false
}

func (rm *room) closeAll(code websocket.StatusCode, reason, cause string) {
	for _, c := range rm.members() {
		c.closeWith(code, reason, cause)
	}
}

// relay queues an editor's accepted update for the other editors once it is durable. It
// waits while the room's relay queue is over RelayQueueBytes (the editor's socket then
// waits too), or until ctx ends.
func (rm *room) relay(ctx context.Context, it relayItem) error {
	for {
		rm.relayMu.Lock()
		if rm.relayBytes == 0 || rm.relayBytes+it.cost() <= rm.srv.opts.RelayQueueBytes {
			rm.relayQ = append(rm.relayQ, it)
			rm.relayBytes += it.cost()
			rm.relayMu.Unlock()
			signal(rm.relayWake)
			return nil
		}
		rm.relayMu.Unlock()
		select {
		case <-rm.relaySpace:
		case <-ctx.Done():
			return ctx.Err()
		case <-rm.ctx.Done():
			return rm.ctx.Err()
		}
	}
}

// relayLoop sends the queued editor updates to the other editors, each once the store has
// it on disk. The updates that are durable together go out as one merged update (one
// message per editor instead of one per update); an editor then also gets its own update
// back in the merge, which Yjs applies as a no-op, as other relays do.
func (rm *room) relayLoop() {
	defer rm.wg.Done()
	for {
		rm.relayMu.Lock()
		items := rm.relayQ
		rm.relayQ = nil
		rm.relayMu.Unlock()
		if len(items) == 0 {
			select {
			case <-rm.relayWake:
				continue
			case <-rm.ctx.Done():
				return
			}
		}
		if seq := items[0].seq; seq > 0 && rm.lease.Flushed() < seq {
			if err := rm.lease.WaitFlushed(rm.ctx, seq); err != nil {
				return // closing
			}
		}
		flushed := rm.lease.Flushed()
		ready := items[:0:0]
		var later []relayItem
		for _, it := range items {
			if it.seq <= flushed {
				ready = append(ready, it)
			} else {
				later = append(later, it)
			}
		}
		if len(later) > 0 {
			rm.relayMu.Lock()
			rm.relayQ = append(later, rm.relayQ...)
			rm.relayMu.Unlock()
		}
		for _, it := range ready {
			if it.counted == nil {
				continue
			}
			if err := it.counted(rm.ctx); err != nil {
				if rm.ctx.Err() != nil {
					return // closing
				}
				rm.srv.log.Warn("the count of an editor's write not on the hub yet could not be saved; it is saved with the next change",
					slog.String("namespaceId", rm.ns), slog.String("error", err.Error()))
			}
		}
		rm.broadcastUpdates(ready)
		freed := 0
		for _, it := range ready {
			freed += it.cost()
			if it.ack {
				it.from.saved()
			}
		}
		rm.relayMu.Lock()
		rm.relayBytes -= freed
		rm.relayMu.Unlock()
		signal(rm.relaySpace)
	}
}

// broadcastUpdates sends editors' updates to the room: one alone to everyone but its
// sender; several merged into one update for everyone. Items without a message (only an
// acknowledgement waited) send nothing.
func (rm *room) broadcastUpdates(all []relayItem) {
	items := make([]relayItem, 0, len(all))
	for _, it := range all {
		if it.msg != nil {
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return
	}
	if len(items) == 1 {
		rm.mu.Lock()
		rm.broadcastLocked(items[0].msg, items[0].from)
		rm.mu.Unlock()
		return
	}
	updates := make([][]byte, len(items))
	for i, it := range items {
		updates[i] = it.update
	}
	msg := rm.mergedMessage(updates, nil)
	rm.mu.Lock()
	if msg != nil {
		rm.broadcastLocked(msg, nil)
	} else {
		for _, it := range items {
			rm.broadcastLocked(it.msg, it.from)
		}
	}
	rm.mu.Unlock()
}

// mergedMessage returns one sync Update message carrying the merge of updates (shared, if
// not nil, holds their yjs.Shared: see yjs.MergeShared), or nil when they do not merge
// (they were all applied, so this does not happen; the caller then sends them one by one).
func (rm *room) mergedMessage(updates [][]byte, shared []*yjs.Shared) []byte {
	merged, err := yjs.MergeShared(updates, shared)
	if err != nil {
		rm.srv.log.Warn("editor updates did not merge; relayed one by one", slog.String("namespaceId", rm.ns),
			slog.String("error", err.Error()))
		return nil
	}
	return AppendSync(nil, SyncUpdate, merged)
}

// signal wakes a capacity-1 channel without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
