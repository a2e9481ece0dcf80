package registry

import (
	"reflect"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
	"github.com/nomicore/nomicore/yjs"
)

func faultyOptions(f *persistencetest.Faults) persistence.Options {
	return persistence.Options{CommitHook: f.Hook, RetryMin: time.Millisecond, RetryMax: 4 * time.Millisecond, CommitDelay: -1}
}

func TestS20_HubDegradedRefusesPeerUpdatesKeepsReadsAndRecovers(t *testing.T) {
	var f persistencetest.Faults
	e := newEnv(t, RoleHub, Config{}, faultyOptions(&f))
	_, l := e.create(t)
	a, _, err := openSession(t, l, SessionOptions{})
	must(t, err)
	b, _, err := openSession(t, l, SessionOptions{})
	must(t, err)
	cl := newClient(10)
	cl.sync(t, mustState(t, l, nil))

	// The disk fails: a write accepted before the store knows it stays queued.
	f.Fail(true)
	kept := cl.set(t, "app", "before", 1.0)
	_, err = a.Apply(ctxT(t), kept)
	must(t, err)
	waitFor(t, "the store to report the failure", func() bool { return !e.store.Healthy() })
	if !l.Degraded() {
		t.Fatal("lease does not report degradation")
	}
	b.Poll()

	refused := cl.set(t, "app", "during", 1.0)
	zeroWrite(t, e, l, []*Session{b}, func() {
		_, err := a.Apply(ctxT(t), refused)
		wantErr(t, err, ErrDegraded)
		if CodeOf(err) != CodePersistenceDegraded {
			t.Fatal(CodeOf(err))
		}
		_, err = l.WriteLocal(ctxT(t), refused)
		wantErr(t, err, ErrDegraded)
		_, err = l.BumpEpoch(ctxT(t))
		wantErr(t, err, ErrDegraded)
		// Reads and state exchange go on — including a peer's sync diff that brings
		// nothing new (the write accepted before the failure, and the whole state as the
		// hub holds it): taken, with nothing written.
		for _, u := range [][]byte{kept, mustState(t, l, nil)} {
			res, err := a.Apply(ctxT(t), u)
			must(t, err)
			if res.Changed || res.Seq != 0 || !res.Degraded {
				t.Fatalf("an included update while degraded: %+v", res)
			}
		}
		_, err = a.StateVector(ctxT(t))
		must(t, err)
		_, err = a.Diff(ctxT(t), []byte{0})
		must(t, err)
		_, err = l.JSON(ctxT(t))
		must(t, err)
		s, st, err := l.OpenSession(ctxT(t), SessionOptions{Snapshot: true})
		must(t, err)
		s.Close()
		if len(st.Snapshot) == 0 {
			t.Fatal("no snapshot while degraded")
		}
	})

	// The disk comes back: the queued write commits and peer updates are accepted again.
	f.Fail(false)
	waitFor(t, "recovery", func() bool { return e.store.Healthy() && !l.Degraded() })
	res, err := a.Apply(ctxT(t), refused)
	must(t, err)
	must(t, l.WaitFlushed(ctxT(t), res.Seq))
	reloaded := reopen(t, e, l)
	if got := reloaded["app"]; !reflect.DeepEqual(got, map[string]any{"before": 1.0, "during": 1.0}) {
		t.Fatalf("reloaded app = %v", got)
	}
}

// reopen releases l, waits for the unload and returns the document loaded again.
func reopen(t *testing.T, e *env, l *Lease) map[string]any {
	t.Helper()
	l2 := e.reload(t, l)
	defer l2.Release()
	j, err := l2.JSON(ctxT(t), Root{"app", yjs.KindMap})
	must(t, err)
	return j
}

func TestS20_PeerDegradedAppliesHubUpdatesInMemoryAndKeepsSaving(t *testing.T) {
	var f persistencetest.Faults
	opts := faultyOptions(&f)
	opts.MaxQueuedAppends = 2 // the third append while the disk fails is refused
	e := newReplica(t, Config{SaveRetryMin: time.Millisecond, SaveRetryMax: 4 * time.Millisecond}, opts)
	peer, pl, hs := e.peer, e.pl, e.ps
	w, err := pl.Watch(0, 0)
	must(t, err)
	defer w.Close()
	author := newClient(20)
	author.sync(t, e.start.Snapshot)

	res, err := hs.Apply(ctxT(t), author.set(t, "app", "healthy", 1.0))
	must(t, err)
	if res.Degraded {
		t.Fatal("a healthy apply reported degraded")
	}
	f.Fail(true)
	var all [][]byte
	hubUpdate := func(k string) ApplyResult {
		u := author.set(t, "app", k, k)
		all = append(all, u)
		res, err := hs.Apply(ctxT(t), u)
		must(t, err)
		if !res.Changed || !res.Degraded {
			t.Fatalf("hub update %s: %+v, want applied while degraded", k, res)
		}
		return res
	}
	u := author.set(t, "app", "a", "a")
	all = append(all, u)
	_, err = hs.Apply(ctxT(t), u) // the store does not know yet
	must(t, err)
	waitFor(t, "the store to report the failure", func() bool { return !peer.store.Healthy() })
	// Local writes are refused; hub updates still apply in memory.
	local := newClient(21)
	local.sync(t, mustState(t, pl, nil))
	_, err = pl.WriteLocal(ctxT(t), local.set(t, "app", "local", 1.0))
	wantErr(t, err, ErrDegraded)
	hubUpdate("b")
	if res := hubUpdate("c"); res.Seq != 0 {
		t.Fatal("the store accepted an append past its queue bound")
	}
	hubUpdate("d")
	if p := w.Poll(); len(p.Updates) != 5 {
		t.Fatalf("watchers saw %d of 5 hub updates", len(p.Updates))
	}
	if !pl.Degraded() {
		t.Fatal("not degraded")
	}
	_, err = hs.StateVector(ctxT(t))
	must(t, err)

	// The disk comes back: the queued appends commit and the saver writes a snapshot with
	// the refused change; the replica is healthy again and local writes work.
	f.Fail(false)
	waitFor(t, "the saver", func() bool { return peer.store.Healthy() && !pl.Degraded() })
	local2 := newClient(22) // the refused write left a gap in client 21's clocks
	local2.sync(t, mustState(t, pl, nil))
	res, err = pl.WriteLocal(ctxT(t), local2.set(t, "app", "local2", 1.0))
	must(t, err)
	if !res.Changed {
		t.Fatal("local write not applied")
	}
	got := reopen(t, peer, pl)["app"].(map[string]any)
	for _, k := range []string{"healthy", "a", "b", "c", "d", "local2"} {
		if _, ok := got[k]; !ok {
			t.Fatalf("after reload %s is missing: %v", k, got)
		}
	}
}

func TestS20_HubBackpressureDegradesUntilASnapshotSaves(t *testing.T) {
	// The store's queue holds one append, and its group commit waits for a fake clock: the
	// second append is refused while the store is otherwise healthy.
	fc := clock.NewFake(time.Unix(0, 0))
	opts := persistence.Options{MaxQueuedAppends: 1, CommitDelay: time.Second, Clock: fc}
	e := newEnv(t, RoleHub, Config{}, opts)
	_, l := e.create(t)
	a, _, err := openSession(t, l, SessionOptions{})
	must(t, err)
	cl := newClient(30)
	cl.sync(t, mustState(t, l, nil))
	r1, err := a.Apply(ctxT(t), cl.set(t, "app", "x", 1.0))
	must(t, err)
	r2, err := a.Apply(ctxT(t), cl.set(t, "app", "y", 1.0))
	must(t, err)
	if r1.Seq == 0 || r2.Seq != 0 || !r2.Changed {
		t.Fatalf("results %+v %+v: want the second append refused by the store", r1, r2)
	}
	if !e.store.Healthy() || !l.Degraded() {
		t.Fatal("a refused append does not degrade the namespace")
	}
	_, err = a.Apply(ctxT(t), cl.set(t, "app", "z", 1.0))
	wantErr(t, err, ErrDegraded)
	// The group commit runs: the queued append commits, then the saver's snapshot.
	if !fc.WaitForTimers(1, 10*time.Second) {
		t.Fatal("the store armed no commit timer")
	}
	fc.Advance(time.Second)
	waitFor(t, "the saver", func() bool { return !l.Degraded() })
	got := reopen(t, e, l)["app"].(map[string]any)
	if !reflect.DeepEqual(got, map[string]any{"x": 1.0, "y": 1.0}) {
		t.Fatalf("after reload: %v", got)
	}
}

// A failed store operation that nothing retries (here an archive) leaves the store
// unhealthy; a hub then refuses every write, so nothing would ever commit again. The refusal
// makes the saver probe with a snapshot, which finds the store healthy once the disk is.
func TestS20_HubRecoversAfterAFailureNothingRetries(t *testing.T) {
	var f persistencetest.Faults
	e := newEnv(t, RoleHub, Config{SaveRetryMin: time.Millisecond, SaveRetryMax: 4 * time.Millisecond}, faultyOptions(&f))
	other, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	_, l := e.create(t)
	cl := newClient(31)
	cl.sync(t, mustState(t, l, nil))
	f.Fail(true)
	_, err = e.reg.Archive(ctxT(t), owner, other.NamespaceID)
	if err == nil || e.store.Healthy() {
		t.Fatalf("archive on a failing disk: %v, healthy %v", err, e.store.Healthy())
	}
	f.Fail(false)
	u := cl.set(t, "app", "k", 1.0)
	_, err = l.WriteLocal(ctxT(t), u)
	wantErr(t, err, ErrDegraded)
	waitFor(t, "the probe", func() bool { return e.store.Healthy() })
	_, err = l.WriteLocal(ctxT(t), u)
	must(t, err)
}
