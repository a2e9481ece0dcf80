package registry

import "github.com/nomicore/nomicore/yjs"

// registryOrigin marks transactions the registry itself makes (meta writes).
type registryOrigin struct{ what string }

var (
	originCreate = &registryOrigin{"create"}
	originBump   = &registryOrigin{"epoch-bump"}
	originSchema = &registryOrigin{"schema"}
)

// localOrigin marks updates of the local write API (Lease.WriteLocal). (Not zero-sized: Go
// may give every zero-sized allocation the same address.) skip, when set, is the watch of
// the writer (Lease.WriteLocalExceptAsync): the update is not fanned out to it.
type localOrigin struct {
	_    byte
	skip *subscription
}

var originLocal = &localOrigin{}

// onUpdate is the single document observer of the runtime
// (docs/protocol.md#sending-and-relaying): it records the update of each transaction and
// fans it out to the subscriptions as one immutable slice shared by all. An update is not
// echoed to the session it came from — except when the document held pending structs before
// the apply: then the transaction may have integrated earlier structs released by it, which
// the origin may lack (docs/protocol.md#document-layout), so it gets the whole transaction
// update too.
func (rt *nsRuntime) onUpdate(update []byte, origin any) {
	rt.txUpdate = update
	rt.act.wrote(len(update))
	rt.changes++
	if origin == originBump {
		// The bump's sessions are fenced by the slot right after this transaction; only
		// watchers see the update.
		rt.fanOut(update, nil, true)
		return
	}
	var skip *subscription
	switch o := origin.(type) {
	case *Session:
		if !rt.hadPending {
			skip = o.sub
		}
	case *localOrigin:
		if !rt.hadPending {
			skip = o.skip
		}
	}
	rt.fanOut(update, skip, false)
}

func (rt *nsRuntime) fanOut(update []byte, skip *subscription, watchersOnly bool) {
	var shared *yjs.Shared
	for _, sub := range rt.subscribers() {
		if sub == skip || (watchersOnly && sub.session) {
			continue
		}
		if shared == nil {
			shared = yjs.Share(update)
		}
		sub.push(shared)
	}
}

// subscribers returns the current fan-out targets (an immutable slice).
func (rt *nsRuntime) subscribers() []*subscription {
	if p := rt.subs.Load(); p != nil {
		return *p
	}
	return nil
}

func (rt *nsRuntime) addSub(sub *subscription) {
	rt.subsMu.Lock()
	defer rt.subsMu.Unlock()
	if rt.gone {
		sub.signalClosed()
		return
	}
	old := rt.subscribers()
	next := make([]*subscription, len(old), len(old)+1)
	copy(next, old)
	next = append(next, sub)
	rt.subs.Store(&next)
}

func (rt *nsRuntime) removeSub(sub *subscription) {
	rt.subsMu.Lock()
	defer rt.subsMu.Unlock()
	old := rt.subscribers()
	for i, x := range old {
		if x == sub {
			next := make([]*subscription, 0, len(old)-1)
			next = append(next, old[:i]...)
			next = append(next, old[i+1:]...)
			rt.subs.Store(&next)
			return
		}
	}
}
