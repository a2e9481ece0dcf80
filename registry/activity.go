package registry

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/yjs"
)

// Activity is what the registry can tell about a namespace without loading it or waiting
// for its sequencer: for an operator's overview (the admin API's status routes).
type Activity struct {
	NamespaceID string
	Owner       string
	// Loaded: a runtime holds the namespace now. When false, the figures are those it had
	// when it last unloaded.
	Loaded bool
	// Identity is the replication identity (the last one known when not loaded).
	Identity Identity
	// Writes counts the transactions that changed the document since it loaded — remote
	// applies, local writes and the registry's own meta writes alike; WriteBytes sums their
	// updates' lengths. Both start at zero at every load.
	Writes, WriteBytes uint64
	// LastWrite is when the last of them was admitted to the sequencer (zero when unknown:
	// none since the registry started, or no Config.StageClock — the admission time is the
	// stage clock's reading; without it the sequencer reads no clock).
	LastWrite time.Time
	// DocumentBytes is the size of the whole document encoded as one update, measured at
	// DocumentMeasuredAt (zero time: not measured yet).
	DocumentBytes      int
	DocumentMeasuredAt time.Time
	// Sessions counts the replication sessions open on the namespace.
	Sessions int
}

// activity is a runtime's counters, written by its goroutine and read by anyone.
type activity struct {
	writes, writeBytes atomic.Uint64
	lastWrite          atomic.Int64 // unix nanoseconds; 0: none
	docBytes           atomic.Int64
	measuredAt         atomic.Int64 // unix nanoseconds; 0: never
	measuredWrites     atomic.Uint64
	measuring          atomic.Bool // a measurement slot is queued

	slotAdmitted time.Time // the admission time of the slot running now (runtime goroutine only)
}

// wrote counts one transaction's update, made by the slot running now (runtime goroutine).
func (a *activity) wrote(n int) {
	a.writes.Add(1)
	a.writeBytes.Add(uint64(n))
	if !a.slotAdmitted.IsZero() {
		a.lastWrite.Store(a.slotAdmitted.UnixNano())
	}
}

// Activity returns the activity of a namespace: a loaded one's current figures, or those an
// unloaded one had when it last unloaded (the registry remembers the last
// MaxRememberedActivity). It never loads a namespace and never waits for a sequencer.
//
// When the loaded document's size was last measured more than remeasure ago (or never) and
// it changed since, Activity also queues a measurement in its sequencer — behind the work
// already admitted, skipped when the queue is full — so a later call sees the new size.
// Measuring encodes the whole document: remeasure bounds how often that happens.
func (r *Registry) Activity(namespaceID string, remeasure time.Duration) (Activity, bool) {
	r.mu.Lock()
	rt := r.loaded[namespaceID]
	r.mu.Unlock()
	if rt == nil {
		return r.past.get(namespaceID)
	}
	a := rt.activitySnapshot()
	if rt.act.measuredWrites.Load() != a.Writes || a.DocumentMeasuredAt.IsZero() {
		if a.DocumentMeasuredAt.IsZero() || r.cfg.Clock.Now().Sub(a.DocumentMeasuredAt) >= remeasure {
			rt.measureSoon()
		}
	}
	return a, true
}

// MaxRememberedActivity bounds how many unloaded namespaces' activity the registry keeps.
const MaxRememberedActivity = 4096

func (rt *nsRuntime) activitySnapshot() Activity {
	a := Activity{NamespaceID: rt.ns, Owner: rt.owner, Loaded: true, Identity: rt.identity(),
		Writes: rt.act.writes.Load(), WriteBytes: rt.act.writeBytes.Load(), DocumentBytes: int(rt.act.docBytes.Load())}
	if ns := rt.act.lastWrite.Load(); ns != 0 {
		a.LastWrite = time.Unix(0, ns)
	}
	if ns := rt.act.measuredAt.Load(); ns != 0 {
		a.DocumentMeasuredAt = time.Unix(0, ns)
	}
	for _, sub := range rt.subscribers() {
		if sub.session {
			a.Sessions++
		}
	}
	return a
}

// measureSoon queues one measurement of the document's encoded size, unless one is queued.
func (rt *nsRuntime) measureSoon() {
	if rt.act.measuring.Swap(true) {
		return
	}
	s := &slot{}
	s.run = func(rt *nsRuntime, _ *slot) {
		defer rt.act.measuring.Store(false)
		if rt.failErr != nil {
			return
		}
		writes := rt.act.writes.Load() // the goroutine is the only writer: stable here
		b, err := yjs.EncodeStateAsUpdate(rt.doc, nil)
		if err != nil {
			return
		}
		rt.act.docBytes.Store(int64(len(b)))
		rt.act.measuredWrites.Store(writes)
		rt.act.measuredAt.Store(rt.reg.cfg.Clock.Now().UnixNano())
	}
	s.fail = func(error) { rt.act.measuring.Store(false) }
	if rt.submit(s) != nil {
		rt.act.measuring.Store(false)
	}
}

// pastActivity remembers the activity of namespaces that unloaded, up to
// MaxRememberedActivity (the oldest is forgotten first).
type pastActivity struct {
	mu    sync.Mutex // guards byID and order
	byID  map[string]Activity
	order []string // namespace ids, oldest first
}

func (p *pastActivity) keep(a Activity) {
	a.Loaded, a.Sessions = false, 0
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byID == nil {
		p.byID = make(map[string]Activity)
	}
	if _, ok := p.byID[a.NamespaceID]; ok {
		p.remove(a.NamespaceID)
	}
	p.order = append(p.order, a.NamespaceID)
	p.byID[a.NamespaceID] = a
	for len(p.order) > MaxRememberedActivity {
		delete(p.byID, p.order[0])
		p.order = p.order[1:]
	}
}

func (p *pastActivity) get(ns string) (Activity, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.byID[ns]
	return a, ok
}

// forget drops a namespace whose replica went away (reset, archive).
func (p *pastActivity) forget(ns string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.byID[ns]; !ok {
		return
	}
	delete(p.byID, ns)
	p.remove(ns)
}

// remove drops ns from the order (caller holds mu).
func (p *pastActivity) remove(ns string) {
	for i, id := range p.order {
		if id == ns {
			p.order = append(p.order[:i], p.order[i+1:]...)
			return
		}
	}
}

// seed carries what a namespace had when it unloaded over to its new runtime: the counters
// go on from where they were (they stay monotonic across loads), and the measured size stays
// valid — an unloaded document does not change.
func (p *pastActivity) seed(rt *nsRuntime) {
	a, ok := p.get(rt.ns)
	if !ok || a.Owner != rt.owner {
		return
	}
	rt.act.writes.Store(a.Writes)
	rt.act.writeBytes.Store(a.WriteBytes)
	if !a.LastWrite.IsZero() {
		rt.act.lastWrite.Store(a.LastWrite.UnixNano())
	}
	if !a.DocumentMeasuredAt.IsZero() {
		rt.act.docBytes.Store(int64(a.DocumentBytes))
		rt.act.measuredAt.Store(a.DocumentMeasuredAt.UnixNano())
		rt.act.measuredWrites.Store(a.Writes)
	}
}
