package registry

import (
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/nomicore/nomicore/yjs"
)

// nsRuntime is the runtime of one loaded namespace: its live document and the single write
// sequencer that every apply of the namespace enters
// (docs/protocol.md#terms-and-invariants). One goroutine — loop — runs the slots in
// admission order (FIFO); it alone touches the document. Slots never wait on the network, a
// session, a lease or the registry; the only waits in the goroutine are at unload, after the
// last slot.
//
// A runtime keeps its writes in one of two places, fixed before its goroutine starts: the
// document store of this process (store: a single hub or a peer) or the shared log of a hub
// cluster (sh). Exactly one of the two is set; only the first can reach a
// persistence.Documents.
//
// Its code is filed by concern: sequencer.go (slots and the goroutine), apply.go (the gates
// and the apply of one update), fanout.go (the document observer and the subscriptions it
// feeds), saver.go (the document store: appends and the snapshot saver), shared.go (the
// shared log), stages.go (the stage timings of an apply).
type nsRuntime struct {
	reg   *Registry
	owner string
	ns    string

	mu       sync.Mutex // guards stopping, exited and queue
	stopping bool
	exited   bool          // the goroutine has run its last slot: nothing more is admitted
	queue    []*slot       // admitted slots, FIFO; bounded by Config.MaxQueuedSlots (full → ErrOverloaded)
	wake     chan struct{} // cap 1: the queue became non-empty, or stopping was set
	done     chan struct{} // closed when the goroutine has exited and the store released the namespace

	refs int // leases; guarded by reg.mu

	ident  atomic.Pointer[Identity]     // the current identity, readable without a slot
	schema atomic.Pointer[ActiveSchema] // the active schema, readable without a slot (nil: none)
	failed atomic.Bool                  // the document broke (an internal apply failure)
	dirty  atomic.Bool                  // store.saved < store.unsaved, for readers outside the goroutine
	// deleted: the namespace is being deleted (delete.go): every later slot is refused, and
	// the unload saves nothing.
	deleted atomic.Bool

	// store is the runtime's part in the document store of this process (Config.Documents),
	// nil in a hub cluster; sh is its part in a hub cluster (Config.Shared), nil otherwise.
	// Set before the goroutine starts and never replaced.
	store   *storeState
	sh      *sharedState
	applied atomic.Uint64 // cluster: the last log position applied, for readers outside the goroutine

	subsMu sync.Mutex                      // serialises changes to subs
	subs   atomic.Pointer[[]*subscription] // fan-out targets in registration order (copy on write)
	gone   bool                            // unloaded: new subscriptions start closed; guarded by subsMu

	// Owned by the runtime goroutine.
	doc           *yjs.Doc
	through       uint64 // the last append sequence number (cluster: log position) of this namespace
	failErr       error
	spare         []*slot      // the other queue buffer, reused
	txUpdate      []byte       // set by onUpdate: the update of the last transaction
	changes       uint64       // transactions that changed the document since load (onUpdate)
	full, diff    encodedState // the last encodings of the whole document and of a diff
	hadPending    bool         // the document held pending structs before the apply in progress
	schemaSeen    schemaState
	unsubscribeFn func()

	act activity // counters for Registry.Activity
}

// newRuntime makes the runtime of a loaded document, through the given append sequence
// number (or log position). The caller sets store or sh before starting it.
func newRuntime(reg *Registry, owner, ns string, doc *yjs.Doc, through uint64) (*nsRuntime, error) {
	id, err := readIdentity(doc)
	if err != nil {
		return nil, ErrInternal.with("namespace document has no valid identity", err)
	}
	rt := &nsRuntime{
		reg:     reg,
		owner:   owner,
		ns:      ns,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		doc:     doc,
		through: through,
	}
	rt.ident.Store(&id)
	rt.loadSchema()
	rt.unsubscribeFn = doc.OnUpdate(rt.onUpdate)
	return rt, nil
}

// identity returns the current identity.
func (rt *nsRuntime) identity() Identity { return *rt.ident.Load() }

// encodedState is the last encoding of the document for one state vector, held weakly: while
// anyone still holds it (a reply on its way to an editor or a peer, a snapshot, an admin
// read) and no transaction changed the document since, it is handed out again instead of
// encoded again — 150 editors joining a 20 MiB document at once share one reply, and so do
// four fresh peers bootstrapping it. Nothing keeps it alive but its readers, so it costs no
// memory once they are done. Runtime goroutine only.
type encodedState struct {
	changes uint64 // rt.changes it reflects
	sv      string // the state vector it answers; "" the whole document
	first   weak.Pointer[byte]
	n       int
}

// maxSharedStateVector bounds the state vectors whose diff is kept for sharing (a longer
// one, of a document with very many writers, is encoded afresh each time).
const maxSharedStateVector = 4 << 10

// encodeState returns the document as an update for a remote state vector (nil, empty or the
// encoded empty state vector, which a fresh editor sends: the whole document). The bytes may
// be shared with other callers: never modify them.
func (rt *nsRuntime) encodeState(sv []byte) ([]byte, error) {
	whole := len(sv) == 0 || (len(sv) == 1 && sv[0] == 0)
	if whole {
		sv = nil
	}
	// Every change that integrates something is a transaction (onUpdate counts it); structs
	// pending for missing dependencies change the encoding without one, so a document
	// holding some is encoded afresh each time.
	shared := !rt.doc.HasPending() && len(sv) <= maxSharedStateVector
	entry := &rt.full
	if !whole {
		entry = &rt.diff
	}
	if shared && entry.n > 0 && entry.changes == rt.changes && entry.sv == string(sv) {
		if p := entry.first.Value(); p != nil {
			rt.reg.statesShared.Add(1)
			return unsafe.Slice(p, entry.n), nil
		}
	}
	b, err := yjs.EncodeStateAsUpdate(rt.doc, sv)
	if err != nil {
		var de *yjs.DecodeError
		if errors.As(err, &de) {
			return nil, ErrApplyFailed.with("malformed state vector", err)
		}
		return nil, ErrInternal.with("encode state", err)
	}
	rt.reg.statesEncoded.Add(1)
	if shared && len(b) > 0 {
		*entry = encodedState{changes: rt.changes, sv: string(sv), first: weak.Make(&b[0]), n: len(b)}
	}
	return b, nil
}

// unload runs when the goroutine has finished every slot: it writes a fresh snapshot when
// changes are unsaved or the log grew long, detaches the sessions and releases the
// namespace in the store. Only here does the goroutine wait on disk.
func (rt *nsRuntime) unload() {
	if st := rt.store; st != nil {
		rt.giveNote() // before anything here waits on the store, whose committer may wait for it
		st.notesLater = false
		st.stopSaver()
		if rt.failErr == nil && !rt.deleted.Load() && (st.saved < st.unsaved || rt.reg.snapshotOnUnload(st.appends)) {
			if err := rt.writeSnapshot(rt.reg.life); err != nil {
				rt.reg.logError("snapshot at unload failed", rt.ns, err)
			}
		}
	} else {
		rt.sharedUnload() // the log keeps the document: nothing to save here
	}
	rt.unsubscribeFn()
	rt.subsMu.Lock()
	subs := rt.subscribers()
	rt.subs.Store(nil)
	rt.gone = true
	rt.subsMu.Unlock()
	for _, sub := range subs {
		sub.signalClosed()
	}
	if rt.store != nil {
		rt.store.docs.Release(rt.owner, rt.ns)
	}
	rt.reg.unloaded(rt)
	close(rt.done)
}
