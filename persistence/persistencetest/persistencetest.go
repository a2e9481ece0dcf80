// Package persistencetest is the conformance suite every persistence.Store implementation
// passes, plus small helpers (a deterministic Compactor, fault injection) for tests of code
// built on a Store.
package persistencetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/persistence"
)

// Concat is a deterministic Compactor for tests: a snapshot is the concatenation of every
// update folded into it, so a document always reads back as one byte string (see Flatten).
func Concat(snapshot []byte, updates [][]byte) ([]byte, error) {
	n := len(snapshot)
	for _, u := range updates {
		n += len(u)
	}
	out := make([]byte, 0, n)
	out = append(out, snapshot...)
	for _, u := range updates {
		out = append(out, u...)
	}
	return out, nil
}

// Flatten returns a document as its snapshot followed by its updates (what Concat folds).
func Flatten(d persistence.Doc) []byte {
	out, _ := Concat(d.Snapshot, d.Updates)
	return out
}

// Update returns the test update for append seq of ns: "<ns>#<seq>;".
func Update(ns string, seq uint64) []byte { return fmt.Appendf(nil, "%s#%d;", ns, seq) }

// Updates returns the concatenation of Update(ns, from) … Update(ns, to).
func Updates(ns string, from, to uint64) []byte {
	var b []byte
	for s := from; s <= to; s++ {
		b = append(b, Update(ns, s)...)
	}
	return b
}

// ErrInjected is the error a Faults hook returns.
var ErrInjected = errors.New("persistencetest: injected commit failure")

// Faults makes commits fail on demand: pass Hook as Options.CommitHook.
type Faults struct{ failing atomic.Bool }

// Fail makes every later commit fail (true) or succeed (false).
func (f *Faults) Fail(on bool) { f.failing.Store(on) }

// Hook is the Options.CommitHook.
func (f *Faults) Hook() error {
	if f.failing.Load() {
		return ErrInjected
	}
	return nil
}

// Factory opens a fresh, empty store with opts. It registers its own cleanup (Close with a
// deadline) with t.
type Factory func(t *testing.T, opts persistence.Options) persistence.Store

// Run runs the conformance suite against the stores open makes.
func Run(t *testing.T, open Factory) {
	s := suite{open: open}
	t.Run("Entries", s.entries)
	t.Run("AppendLoad", s.appendLoad)
	t.Run("FlushReporting", s.flushReporting)
	t.Run("LoadIncludesQueued", s.loadIncludesQueued)
	t.Run("S20_WriteFailureAndRecovery", s.writeFailureAndRecovery)
	t.Run("Backpressure", s.backpressure)
	t.Run("CompactionInBackground", s.compactionInBackground)
	t.Run("CompactionWaitsForAQuarterOfTheSnapshot", s.compactionSnapshotRatio)
	t.Run("CompactionWithConcurrentAppends", s.compactionWithConcurrentAppends)
	t.Run("CompactionFailure", s.compactionFailure)
	t.Run("ReplaceSnapshot", s.replaceSnapshot)
	t.Run("Archive", s.archive)
	t.Run("Reset", s.reset)
	t.Run("ConfigKV", s.config)
	t.Run("ConcurrentAppendsManyNamespaces", s.concurrentAppends)
	t.Run("ReleaseKeepsNothing", s.release)
	t.Run("Close", s.close)
	t.Run("CloseAbandons", s.closeAbandons)
}

type suite struct{ open Factory }

const owner = "default"

var t0 = time.Date(2026, 9, 22, 10, 0, 0, 123456789, time.UTC)

func ns(i int) string { return fmt.Sprintf("ns-%032x", i) }

func ctxT(t *testing.T) context.Context { return testkit.Context(t, 20*time.Second) }

var must = testkit.Must

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

func create(t *testing.T, st persistence.Store, id string, snapshot []byte) {
	t.Helper()
	must(t, st.CreateEntry(ctxT(t), persistence.Entry{NamespaceID: id, Owner: owner, CreatedAt: t0}, snapshot))
}

// appendN appends Update(id, from..to) and checks the sequence numbers.
func appendN(t *testing.T, st persistence.Store, id string, from, to uint64) {
	t.Helper()
	for s := from; s <= to; s++ {
		seq, err := st.Append(owner, id, Update(id, s))
		must(t, err)
		if seq != s {
			t.Fatalf("Append returned seq %d, want %d", seq, s)
		}
	}
}

func flushed(t *testing.T, st persistence.Store, id string, seq uint64) {
	t.Helper()
	must(t, st.WaitFlushed(ctxT(t), owner, id, seq))
}

// checkDoc loads id and checks it reads back as want, with Through = through.
func checkDoc(t *testing.T, st persistence.Store, id string, want []byte, through uint64) persistence.Doc {
	t.Helper()
	doc, err := st.Load(ctxT(t), owner, id)
	must(t, err)
	if got := Flatten(doc); !bytes.Equal(got, want) {
		t.Fatalf("%s reads back as %q, want %q", id, got, want)
	}
	if doc.Through != through || doc.SnapshotThrough+uint64(len(doc.Updates)) != doc.Through {
		t.Fatalf("%s: Through %d, SnapshotThrough %d with %d updates; want Through %d",
			id, doc.Through, doc.SnapshotThrough, len(doc.Updates), through)
	}
	return doc
}

func (s suite) entries(t *testing.T) {
	st := s.open(t, persistence.Options{})
	ctx := ctxT(t)
	e1 := persistence.Entry{NamespaceID: ns(2), Owner: "a", CreatedAt: t0, Meta: map[string]string{"k": "v"}}
	e2 := persistence.Entry{NamespaceID: ns(1), Owner: "b", CreatedAt: t0.Add(time.Second)}
	e3 := persistence.Entry{NamespaceID: ns(3), Owner: "a", CreatedAt: t0.Add(-time.Hour)}
	for _, e := range []persistence.Entry{e1, e2, e3} {
		must(t, st.CreateEntry(ctx, e, nil))
	}
	wantErr(t, st.CreateEntry(ctx, persistence.Entry{NamespaceID: ns(2), Owner: "b", CreatedAt: t0}, nil), persistence.ErrExists)

	same := func(got, want persistence.Entry) {
		t.Helper()
		if got.NamespaceID != want.NamespaceID || got.Owner != want.Owner || got.State != persistence.StateActive ||
			!got.CreatedAt.Equal(want.CreatedAt) || fmt.Sprint(got.Meta) != fmt.Sprint(want.Meta) {
			t.Fatalf("entry %+v, want %+v (active)", got, want)
		}
	}
	got, err := st.Entry(ctx, ns(2))
	must(t, err)
	same(got, e1)
	if got.Meta != nil {
		got.Meta["k"] = "changed" // the caller's copy only
	}
	got, err = st.Entry(ctx, ns(2))
	must(t, err)
	same(got, e1)

	_, err = st.Entry(ctx, ns(9))
	wantErr(t, err, persistence.ErrNotFound)

	list, err := st.Entries(ctx, "a")
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("Entries(a) = %+v", list)
	}
	same(list[0], e1)
	same(list[1], e3)
	list, err = st.Entries(ctx, "")
	must(t, err)
	if len(list) != 3 {
		t.Fatalf("Entries() = %+v", list)
	}
	same(list[0], e2)
	list, err = st.Entries(ctx, "nobody")
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("Entries(nobody) = %+v", list)
	}

	wantErr(t, st.CreateEntry(ctx, persistence.Entry{NamespaceID: "", Owner: "a"}, nil), persistence.ErrInvalid)
	wantErr(t, st.CreateEntry(ctx, persistence.Entry{NamespaceID: ns(5), Owner: ""}, nil), persistence.ErrInvalid)
	wantErr(t, st.CreateEntry(ctx, persistence.Entry{NamespaceID: string(make([]byte, 256)), Owner: "a"}, nil), persistence.ErrInvalid)
	wantErr(t, st.CreateEntry(ctx, persistence.Entry{NamespaceID: "\xff", Owner: "a"}, nil), persistence.ErrInvalid)
	wantErr(t, st.CreateEntry(ctx, persistence.Entry{NamespaceID: ns(5), Owner: "a", State: persistence.StateArchived}, nil), persistence.ErrInvalid)
}

func (s suite) appendLoad(t *testing.T) {
	st := s.open(t, persistence.Options{})
	ctx := ctxT(t)
	id := ns(1)
	create(t, st, id, []byte("S;"))
	checkDoc(t, st, id, []byte("S;"), 0)
	appendN(t, st, id, 1, 100)
	flushed(t, st, id, 100)
	if got := st.Flushed(owner, id); got != 100 {
		t.Fatalf("Flushed = %d, want 100", got)
	}
	st.Release(owner, id)
	if got := st.Flushed(owner, id); got != 0 {
		t.Fatalf("Flushed after Release = %d, want 0", got)
	}
	_, err := st.Append(owner, id, []byte("x"))
	wantErr(t, err, persistence.ErrNotLoaded)

	doc := checkDoc(t, st, id, append([]byte("S;"), Updates(id, 1, 100)...), 100)
	if string(doc.Snapshot) != "S;" || len(doc.Updates) != 100 || doc.SnapshotThrough != 0 {
		t.Fatalf("doc = snapshot %q through %d, %d updates", doc.Snapshot, doc.SnapshotThrough, len(doc.Updates))
	}
	appendN(t, st, id, 101, 101) // numbering continues after a reload

	_, err = st.Load(ctx, owner, ns(2))
	wantErr(t, err, persistence.ErrNotFound)
	_, err = st.Load(ctx, "other", id)
	wantErr(t, err, persistence.ErrNotFound)
	_, err = st.Append("other", id, []byte("x"))
	wantErr(t, err, persistence.ErrNotLoaded)
	_, err = st.Load(ctx, owner, "")
	wantErr(t, err, persistence.ErrInvalid)

	// Append copies its argument.
	buf := []byte("mutable;")
	seq, err := st.Append(owner, id, buf)
	must(t, err)
	copy(buf, "XXXXXXXX")
	flushed(t, st, id, seq)
	st.Release(owner, id)
	checkDoc(t, st, id, append(append([]byte("S;"), Updates(id, 1, 101)...), "mutable;"...), 102)
}

func (s suite) flushReporting(t *testing.T) {
	var mu sync.Mutex
	last := map[string]uint64{}
	calls := 0
	var bad error
	st := s.open(t, persistence.Options{OnFlushed: func(o, id string, through uint64) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if o != owner || through <= last[id] {
			bad = fmt.Errorf("OnFlushed(%s, %s, %d) after %d", o, id, through, last[id])
		}
		last[id] = through
	}})
	ctx := ctxT(t)
	a, b := ns(1), ns(2)
	create(t, st, a, nil)
	create(t, st, b, nil)
	for i := uint64(1); i <= 50; i++ {
		appendN(t, st, a, i, i)
		if i%2 == 0 {
			appendN(t, st, b, i/2, i/2)
		}
	}
	flushed(t, st, a, 50)
	flushed(t, st, b, 25)
	// OnFlushed runs right after the position becomes visible to WaitFlushed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		ok, err, report := last[a] == 50 && last[b] == 25, bad, fmt.Sprint(last, " after ", calls, " calls")
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("OnFlushed: last %s", report)
		}
	}
	if st.Flushed(owner, a) != 50 || st.Flushed(owner, b) != 25 {
		t.Fatalf("Flushed = %d, %d", st.Flushed(owner, a), st.Flushed(owner, b))
	}
	wantErr(t, st.WaitFlushed(ctx, owner, a, 51), persistence.ErrInvalid)
	wantErr(t, st.WaitFlushed(ctx, owner, ns(9), 1), persistence.ErrNotLoaded)
	stats := st.Stats()
	if stats.Committed != 75 || stats.Commits == 0 || stats.Commits > 75 || stats.Queued != 0 {
		t.Fatalf("Stats = %+v", stats)
	}
}

// healthEvents records OnHealthChange calls.
type healthEvents struct{ ch chan bool }

func newHealthEvents() *healthEvents { return &healthEvents{ch: make(chan bool, 64)} }

func (h *healthEvents) on(healthy bool, err error) {
	if healthy != (err == nil) {
		panic(fmt.Sprintf("OnHealthChange(%v, %v)", healthy, err))
	}
	h.ch <- healthy
}

func (h *healthEvents) want(t *testing.T, healthy bool) {
	t.Helper()
	select {
	case got := <-h.ch:
		if got != healthy {
			t.Fatalf("health changed to %v, want %v", got, healthy)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no health change to %v", healthy)
	}
}

func (s suite) loadIncludesQueued(t *testing.T) {
	var f Faults
	h := newHealthEvents()
	st := s.open(t, persistence.Options{CommitHook: f.Hook, OnHealthChange: h.on, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	id := ns(1)
	create(t, st, id, nil)
	appendN(t, st, id, 1, 3)
	flushed(t, st, id, 3)
	f.Fail(true)
	appendN(t, st, id, 4, 6)
	h.want(t, false)
	st.Release(owner, id) // queued appends keep the namespace resident until committed
	if st.Stats().Resident != 1 {
		t.Fatalf("Resident = %d with queued appends, want 1", st.Stats().Resident)
	}
	checkDoc(t, st, id, Updates(id, 1, 6), 6)
	appendN(t, st, id, 7, 7)
	f.Fail(false)
	h.want(t, true)
	flushed(t, st, id, 7)
	st.Release(owner, id)
	checkDoc(t, st, id, Updates(id, 1, 7), 7)
}

func (s suite) writeFailureAndRecovery(t *testing.T) {
	var f Faults
	h := newHealthEvents()
	st := s.open(t, persistence.Options{CommitHook: f.Hook, OnHealthChange: h.on, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	id := ns(1)
	create(t, st, id, nil)
	if !st.Healthy() {
		t.Fatal("a new store is not healthy")
	}
	f.Fail(true)
	appendN(t, st, id, 1, 20)
	h.want(t, false)
	if st.Healthy() {
		t.Fatal("Healthy after a failed commit")
	}
	short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	wantErr(t, st.WaitFlushed(short, owner, id, 1), context.DeadlineExceeded)
	if st.Flushed(owner, id) != 0 {
		t.Fatalf("Flushed = %d while every commit fails", st.Flushed(owner, id))
	}
	// A control operation behind the failing appends fails only when its context ends.
	short2, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	wantErr(t, st.ReplaceSnapshot(short2, owner, id, []byte("never;"), 20), context.DeadlineExceeded)
	f.Fail(false)
	h.want(t, true)
	flushed(t, st, id, 20)
	if !st.Healthy() || st.Stats().CommitErrors == 0 {
		t.Fatalf("Healthy %v, stats %+v", st.Healthy(), st.Stats())
	}
	st.Release(owner, id)
	checkDoc(t, st, id, Updates(id, 1, 20), 20) // retried, nothing lost or doubled

	// A control operation that fails on its own is reported to its caller, not retried.
	f.Fail(true)
	wantErr(t, st.ReplaceSnapshot(ctxT(t), owner, id, []byte("x;"), 20), ErrInjected)
	h.want(t, false)
	f.Fail(false)
	appendN(t, st, id, 21, 21)
	h.want(t, true)
	flushed(t, st, id, 21)
	st.Release(owner, id)
	checkDoc(t, st, id, Updates(id, 1, 21), 21)
}

func (s suite) backpressure(t *testing.T) {
	var f Faults
	h := newHealthEvents()
	st := s.open(t, persistence.Options{CommitHook: f.Hook, OnHealthChange: h.on, MaxQueuedAppends: 4, MaxQueuedBytes: 1000,
		RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	id := ns(1)
	create(t, st, id, nil)
	f.Fail(true)
	appendN(t, st, id, 1, 4)
	h.want(t, false)
	_, err := st.Append(owner, id, Update(id, 5))
	wantErr(t, err, persistence.ErrBackpressure)
	if st.Stats().Backpressure != 1 || st.Stats().Queued != 4 {
		t.Fatalf("Stats = %+v", st.Stats())
	}
	f.Fail(false)
	h.want(t, true)
	flushed(t, st, id, 4)
	appendN(t, st, id, 5, 5) // the refused append used no sequence number
	flushed(t, st, id, 5)

	// The byte bound, and the one oversized append an empty queue takes.
	f.Fail(true)
	big := bytes.Repeat([]byte("b"), 1500)
	seq, err := st.Append(owner, id, big)
	must(t, err)
	h.want(t, false)
	_, err = st.Append(owner, id, []byte("x"))
	wantErr(t, err, persistence.ErrBackpressure)
	f.Fail(false)
	h.want(t, true)
	flushed(t, st, id, seq)
	st.Release(owner, id)
	checkDoc(t, st, id, append(Updates(id, 1, 5), big...), 6)
}

type compactions struct {
	mu      sync.Mutex // guards through
	through map[string]uint64
	ch      chan struct{}
}

func newCompactions() *compactions {
	return &compactions{through: map[string]uint64{}, ch: make(chan struct{}, 1000)}
}

func (c *compactions) on(o, id string, through uint64) {
	c.mu.Lock()
	c.through[id] = through
	c.mu.Unlock()
	c.ch <- struct{}{}
}

func (c *compactions) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no compaction")
	}
}

func (s suite) compactionInBackground(t *testing.T) {
	c := newCompactions()
	st := s.open(t, persistence.Options{Compactor: Concat, CompactAfterCount: 10, CompactAfterBytes: -1, OnCompacted: c.on})
	id := ns(1)
	create(t, st, id, []byte("S;"))
	appendN(t, st, id, 1, 35)
	flushed(t, st, id, 35)
	c.wait(t)
	// The compactor runs on its own goroutine: wait for it to catch up with the log.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		through := c.through[id]
		c.mu.Unlock()
		if through >= 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("compacted through %d only", through)
		}
		c.wait(t)
	}
	doc := checkDoc(t, st, id, append([]byte("S;"), Updates(id, 1, 35)...), 35)
	if doc.SnapshotThrough < 30 || len(doc.Updates) > 5 || st.Stats().Compactions == 0 {
		t.Fatalf("snapshot through %d, %d updates left, stats %+v", doc.SnapshotThrough, len(doc.Updates), st.Stats())
	}
	// A later Load of the released namespace sees the same document.
	st.Release(owner, id)
	checkDoc(t, st, id, append([]byte("S;"), Updates(id, 1, 35)...), 35)

	// The byte threshold.
	c2 := newCompactions()
	st2 := s.open(t, persistence.Options{Compactor: Concat, CompactAfterCount: -1, CompactAfterBytes: 64, OnCompacted: c2.on})
	create(t, st2, id, nil)
	appendN(t, st2, id, 1, 3) // 3 × 39 bytes ≥ 64
	flushed(t, st2, id, 3)
	c2.wait(t)
}

// A compaction rewrites the whole snapshot, so it waits until the log holds at least a
// quarter of the snapshot's bytes, however low the count threshold.
func (s suite) compactionSnapshotRatio(t *testing.T) {
	c := newCompactions()
	st := s.open(t, persistence.Options{Compactor: Concat, CompactAfterCount: 1, CompactAfterBytes: -1, OnCompacted: c.on})
	id := ns(1)
	snapshot := bytes.Repeat([]byte("s"), 4000)
	create(t, st, id, snapshot)
	appendN(t, st, id, 1, 20) // 20 × 39 bytes < 4000/4: no compaction may start
	flushed(t, st, id, 20)
	appendN(t, st, id, 21, 30) // 30 × 39 bytes ≥ 4000/4
	flushed(t, st, id, 30)
	c.wait(t)
	c.mu.Lock()
	through := c.through[id]
	c.mu.Unlock()
	if through != 30 || st.Stats().Compactions != 1 {
		t.Fatalf("compacted through %d in %d compactions; want one, through 30", through, st.Stats().Compactions)
	}
	checkDoc(t, st, id, append(snapshot, Updates(id, 1, 30)...), 30)
}

func (s suite) compactionWithConcurrentAppends(t *testing.T) {
	st := s.open(t, persistence.Options{Compactor: Concat, CompactAfterCount: 7})
	ctx := ctxT(t)
	id := ns(1)
	create(t, st, id, nil)
	const n = 400
	done := make(chan error, 1)
	go func() {
		for i := uint64(1); i <= n; i++ {
			if _, err := st.Append(owner, id, Update(id, i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 20 {
		must(t, st.Compact(ctx, owner, id))
		doc, err := st.Load(ctx, owner, id)
		must(t, err)
		if want := Updates(id, 1, doc.Through); !bytes.Equal(Flatten(doc), want) {
			t.Fatalf("during compaction the document reads %q, want %q", Flatten(doc), want)
		}
	}
	must(t, <-done)
	flushed(t, st, id, n)
	must(t, st.Compact(ctx, owner, id))
	doc := checkDoc(t, st, id, Updates(id, 1, n), n)
	if len(doc.Updates) != 0 || doc.SnapshotThrough != n {
		t.Fatalf("after a final Compact: %d updates left, snapshot through %d", len(doc.Updates), doc.SnapshotThrough)
	}
	must(t, st.Compact(ctx, owner, id)) // nothing to fold

	st2 := s.open(t, persistence.Options{})
	create(t, st2, id, nil)
	wantErr(t, st2.Compact(ctx, owner, id), persistence.ErrNoCompactor)
}

func (s suite) compactionFailure(t *testing.T) {
	errBoom := errors.New("boom")
	failures := make(chan error, 100)
	var calls atomic.Int32
	st := s.open(t, persistence.Options{
		Compactor: func([]byte, [][]byte) ([]byte, error) {
			if calls.Add(1) == 2 {
				panic("compactor bug")
			}
			return nil, errBoom
		},
		CompactAfterCount: 5,
		OnCompactionError: func(o, id string, err error) { failures <- err },
	})
	id := ns(1)
	create(t, st, id, []byte("S;"))
	appendN(t, st, id, 1, 5)
	flushed(t, st, id, 5)
	select {
	case err := <-failures:
		wantErr(t, err, errBoom)
	case <-time.After(10 * time.Second):
		t.Fatal("no OnCompactionError")
	}
	err := st.Compact(ctxT(t), owner, id) // the second call panics inside the compactor
	if err == nil || errors.Is(err, errBoom) {
		t.Fatalf("Compact with a panicking compactor: %v", err)
	}
	checkDoc(t, st, id, append([]byte("S;"), Updates(id, 1, 5)...), 5)
}

func (s suite) replaceSnapshot(t *testing.T) {
	st := s.open(t, persistence.Options{})
	ctx := ctxT(t)
	id := ns(1)
	create(t, st, id, nil)
	appendN(t, st, id, 1, 10)
	// Not waiting for the flush: the replacement is ordered after the appends.
	must(t, st.ReplaceSnapshot(ctx, owner, id, Updates(id, 1, 6), 6))
	doc := checkDoc(t, st, id, Updates(id, 1, 10), 10)
	if doc.SnapshotThrough != 6 || len(doc.Updates) != 4 {
		t.Fatalf("snapshot through %d, %d updates", doc.SnapshotThrough, len(doc.Updates))
	}
	wantErr(t, st.ReplaceSnapshot(ctx, owner, id, nil, 11), persistence.ErrInvalid)
	wantErr(t, st.ReplaceSnapshot(ctx, owner, id, nil, 3), persistence.ErrInvalid) // older than the stored one
	wantErr(t, st.ReplaceSnapshot(ctx, owner, ns(2), nil, 0), persistence.ErrNotLoaded)
	must(t, st.ReplaceSnapshot(ctx, owner, id, []byte("whole;"), 10))
	st.Release(owner, id)
	doc = checkDoc(t, st, id, []byte("whole;"), 10)
	if len(doc.Updates) != 0 {
		t.Fatalf("%d updates left", len(doc.Updates))
	}
}

func (s suite) archive(t *testing.T) {
	st := s.open(t, persistence.Options{})
	ctx := ctxT(t)
	id := ns(1)
	create(t, st, id, []byte("S;"))
	appendN(t, st, id, 1, 5) // queued: Archive is ordered after them
	info, err := st.Archive(ctx, owner, id)
	must(t, err)
	if info.ID != 1 || info.Reason != persistence.ReasonArchive || info.NamespaceID != id ||
		info.Entry.Owner != owner || info.Entry.State != persistence.StateActive || !info.Entry.CreatedAt.Equal(t0) ||
		!info.HasDoc || info.LogUpdates != 5 || info.Through != 5 || info.SnapshotBytes != 2 {
		t.Fatalf("ArchiveInfo = %+v", info)
	}
	ent, err := st.Entry(ctx, id)
	must(t, err)
	if ent.State != persistence.StateArchived {
		t.Fatalf("entry state %v after Archive", ent.State)
	}
	_, err = st.Load(ctx, owner, id)
	wantErr(t, err, persistence.ErrNotFound)
	_, err = st.Append(owner, id, []byte("x"))
	wantErr(t, err, persistence.ErrNotLoaded)
	_, err = st.Archive(ctx, owner, id)
	wantErr(t, err, persistence.ErrArchived)
	_, err = st.Archive(ctx, "other", id)
	wantErr(t, err, persistence.ErrNotFound)
	_, err = st.Archive(ctx, owner, ns(2))
	wantErr(t, err, persistence.ErrNotFound)
	wantErr(t, st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, nil), persistence.ErrExists)

	list, err := st.Archives(ctx, id)
	must(t, err)
	if len(list) != 1 || list[0].ID != 1 || list[0].LogUpdates != 5 || list[0].Entry.State != persistence.StateActive {
		t.Fatalf("Archives = %+v", list)
	}
	doc, err := st.LoadArchive(ctx, id, 1)
	must(t, err)
	if got, want := Flatten(doc), append([]byte("S;"), Updates(id, 1, 5)...); !bytes.Equal(got, want) || doc.Through != 5 {
		t.Fatalf("archive reads %q through %d, want %q", got, doc.Through, want)
	}
	_, err = st.LoadArchive(ctx, id, 2)
	wantErr(t, err, persistence.ErrNotFound)
}

func (s suite) reset(t *testing.T) {
	st := s.open(t, persistence.Options{})
	ctx := ctxT(t)
	id, other := ns(1), ns(2)
	create(t, st, other, nil)
	create(t, st, id, []byte("A;"))
	appendN(t, st, id, 1, 3)
	info, err := st.Reset(ctx, owner, id)
	must(t, err)
	if info.ID != 1 || info.Reason != persistence.ReasonReset || info.Entry.Owner != owner || info.LogUpdates != 3 {
		t.Fatalf("ArchiveInfo = %+v", info)
	}
	_, err = st.Entry(ctx, id)
	wantErr(t, err, persistence.ErrNotFound)
	_, err = st.Load(ctx, owner, id)
	wantErr(t, err, persistence.ErrNotFound)
	wantErr(t, st.WaitFlushed(ctx, owner, id, 3), persistence.ErrNotLoaded)

	// No local replica: the namespace bootstraps again under the same id.
	create(t, st, id, []byte("B;"))
	appendN(t, st, id, 1, 2)
	info, err = st.Reset(ctx, owner, id)
	must(t, err)
	if info.ID != 2 || info.LogUpdates != 2 {
		t.Fatalf("second ArchiveInfo = %+v", info)
	}
	_, err = st.Reset(ctx, owner, id)
	wantErr(t, err, persistence.ErrNotFound)

	list, err := st.Archives(ctx, "")
	must(t, err)
	if len(list) != 2 || list[0].ID != 1 || list[1].ID != 2 || list[0].NamespaceID != id {
		t.Fatalf("Archives = %+v", list)
	}
	for i, want := range [][]byte{append([]byte("A;"), Updates(id, 1, 3)...), append([]byte("B;"), Updates(id, 1, 2)...)} {
		doc, err := st.LoadArchive(ctx, id, uint64(i+1))
		must(t, err)
		if !bytes.Equal(Flatten(doc), want) {
			t.Fatalf("archive %d reads %q, want %q", i+1, Flatten(doc), want)
		}
	}
	checkDoc(t, st, other, nil, 0) // untouched
}

func (s suite) config(t *testing.T) {
	st := s.open(t, persistence.Options{})
	ctx := ctxT(t)
	_, err := st.Config(ctx, "targets")
	wantErr(t, err, persistence.ErrNotFound)
	must(t, st.PutConfig(ctx, "targets", []byte(`["ns-1"]`)))
	must(t, st.PutConfig(ctx, "targets", []byte(`["ns-1","ns-2"]`)))
	must(t, st.PutConfig(ctx, "target/b", []byte{0, 1, 2, 255}))
	must(t, st.PutConfig(ctx, "target/a", []byte{}))
	v, err := st.Config(ctx, "targets")
	must(t, err)
	if string(v) != `["ns-1","ns-2"]` {
		t.Fatalf("Config = %q", v)
	}
	v, err = st.Config(ctx, "target/b")
	must(t, err)
	if !bytes.Equal(v, []byte{0, 1, 2, 255}) {
		t.Fatalf("Config = %v", v)
	}
	v, err = st.Config(ctx, "target/a")
	must(t, err)
	if len(v) != 0 {
		t.Fatalf("Config = %v", v)
	}
	keys, err := st.ConfigKeys(ctx, "target/")
	must(t, err)
	if fmt.Sprint(keys) != "[target/a target/b]" {
		t.Fatalf("ConfigKeys = %q", keys)
	}
	must(t, st.DeleteConfig(ctx, "targets"))
	must(t, st.DeleteConfig(ctx, "targets"))
	_, err = st.Config(ctx, "targets")
	wantErr(t, err, persistence.ErrNotFound)
	wantErr(t, st.PutConfig(ctx, "", nil), persistence.ErrInvalid)
}

func (s suite) concurrentAppends(t *testing.T) {
	st := s.open(t, persistence.Options{Compactor: Concat, CompactAfterCount: 30})
	const namespaces, each = 40, 100
	for i := range namespaces {
		create(t, st, ns(i), nil)
	}
	var wg sync.WaitGroup
	errs := make(chan error, namespaces)
	for i := range namespaces {
		wg.Go(func() {
			id := ns(i)
			for s := uint64(1); s <= each; s++ {
				seq, err := st.Append(owner, id, Update(id, s))
				if err == nil && seq != s {
					err = fmt.Errorf("seq %d, want %d", seq, s)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- st.WaitFlushed(context.Background(), owner, id, each)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	for i := range namespaces {
		st.Release(owner, ns(i))
		checkDoc(t, st, ns(i), Updates(ns(i), 1, each), each)
		st.Release(owner, ns(i))
	}
}

func (s suite) release(t *testing.T) {
	st := s.open(t, persistence.Options{})
	const n = 100
	for i := range n {
		create(t, st, ns(i), nil)
		appendN(t, st, ns(i), 1, 3)
	}
	if r := st.Stats().Resident; r != n {
		t.Fatalf("Resident = %d, want %d", r, n)
	}
	for i := range n {
		flushed(t, st, ns(i), 3)
		st.Release(owner, ns(i))
	}
	if r := st.Stats().Resident; r != 0 {
		t.Fatalf("Resident = %d after releasing every namespace", r)
	}
	st.Release(owner, ns(0)) // releasing twice is harmless
	checkDoc(t, st, ns(0), Updates(ns(0), 1, 3), 3)
	if r := st.Stats().Resident; r != 1 {
		t.Fatalf("Resident = %d after one Load", r)
	}
}

func (s suite) close(t *testing.T) {
	st := s.open(t, persistence.Options{CommitDelay: 50 * time.Millisecond})
	ctx := ctxT(t)
	id := ns(1)
	create(t, st, id, nil)
	appendN(t, st, id, 1, 10) // still waiting for the commit delay
	must(t, st.Close(ctx))
	if got := st.Flushed(owner, id); got != 10 {
		t.Fatalf("Close left appends unflushed: Flushed = %d", got)
	}
	must(t, st.Close(ctx))
	_, err := st.Append(owner, id, []byte("x"))
	wantErr(t, err, persistence.ErrClosed)
	_, err = st.Load(ctx, owner, id)
	wantErr(t, err, persistence.ErrClosed)
	_, err = st.Entry(ctx, id)
	wantErr(t, err, persistence.ErrClosed)
	wantErr(t, st.PutConfig(ctx, "k", nil), persistence.ErrClosed)
	wantErr(t, st.ReplaceSnapshot(ctx, owner, id, nil, 10), persistence.ErrClosed)
	_, err = st.Archive(ctx, owner, id)
	wantErr(t, err, persistence.ErrClosed)
	wantErr(t, st.Compact(ctx, owner, id), persistence.ErrClosed)
}

func (s suite) closeAbandons(t *testing.T) {
	var f Faults
	h := newHealthEvents()
	st := s.open(t, persistence.Options{CommitHook: f.Hook, OnHealthChange: h.on, RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	id := ns(1)
	create(t, st, id, nil)
	f.Fail(true)
	appendN(t, st, id, 1, 3)
	h.want(t, false)
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := st.Close(short)
	if err == nil || !errors.Is(err, ErrInjected) {
		t.Fatalf("Close = %v, want an error naming the 3 abandoned appends", err)
	}
	if again := st.Close(context.Background()); again == nil || again.Error() != err.Error() {
		t.Fatalf("second Close = %v, want %v", again, err)
	}
	wantErr(t, st.WaitFlushed(ctxT(t), owner, id, 2), persistence.ErrClosed)
}
