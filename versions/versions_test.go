package versions

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var must = testkit.Must

const owner = "default"

type env struct {
	store *persistence.MemoryStore
	reg   *registry.Registry
	svc   *Service
	feed  changefeed.Source
	clk   *clock.Fake
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	st, err := persistence.NewMemoryStore(persistence.Options{Compactor: registry.Compactor(), CommitDelay: -1, Clock: clk,
		ChangeFeed: &persistence.ChangeFeedOptions{StateVector: registry.FeedStateVector}})
	must(t, err)
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Documents: st})
	must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		must(t, reg.Close(ctx))
		must(t, st.Close(ctx))
	})
	feed := changefeed.StoreSource{Feed: st}
	opts.Registry, opts.Store, opts.Feed, opts.Config, opts.Clock = reg, st, feed, st, clk
	return &env{store: st, reg: reg, svc: New(opts), feed: feed, clk: clk}
}

func ctxT(t *testing.T) context.Context { return testkit.Context(t, 30*time.Second) }

// write sets text "t" to s (replacing what it held) through the local write door.
func (e *env) write(t *testing.T, ns string, edit func(d *yjs.Doc)) {
	t.Helper()
	l, err := e.reg.Open(ctxT(t), owner, ns)
	must(t, err)
	defer l.Release()
	state, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	d := yjs.NewDoc()
	must(t, yjs.ApplyUpdate(d, state, nil))
	var u []byte
	unsub := d.OnUpdate(func(b []byte, _ any) { u = append([]byte(nil), b...) })
	edit(d)
	unsub()
	res, err := l.WriteLocal(ctxT(t), u)
	must(t, err)
	must(t, l.WaitFlushed(ctxT(t), res.Seq))
}

func (e *env) json(t *testing.T, ns string) string {
	t.Helper()
	l, err := e.reg.Open(ctxT(t), owner, ns)
	must(t, err)
	defer l.Release()
	doc, err := l.JSON(ctxT(t), registry.Root{Name: "t", Kind: yjs.KindText}, registry.Root{Name: "m", Kind: yjs.KindMap})
	must(t, err)
	b, _ := json.Marshal(doc)
	return string(b)
}

func setText(s string) func(d *yjs.Doc) {
	return func(d *yjs.Doc) {
		var err error
		d.Transact(nil, func(*yjs.Transaction) {
			txt := d.GetText("t")
			if n := txt.Len(); n > 0 {
				err = txt.Delete(0, n)
			}
			if err == nil {
				err = txt.Insert(0, s, nil)
			}
		})
		if err != nil {
			panic(err)
		}
	}
}

// A version reads as the document read when it was taken, after later writes and a
// compaction; restoring it writes the change, takes the before-restore version and marks
// the feed; restoring that one undoes the restore.
func TestTakeReadRestoreUndo(t *testing.T) {
	e := newEnv(t, Options{})
	c, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	ns := c.NamespaceID
	e.write(t, ns, setText("first draft"))
	e.write(t, ns, func(d *yjs.Doc) { must(t, d.GetMap("m").Set("k", "v1")) })
	v1, err := e.svc.Take(ctxT(t), owner, ns, "draft", persistence.VersionManual)
	must(t, err)
	atV1 := e.json(t, ns)
	e.write(t, ns, setText("second draft, much longer"))
	e.write(t, ns, func(d *yjs.Doc) { must(t, d.GetMap("m").Delete("k")) })
	must(t, e.store.Compact(ctxT(t), owner, ns))
	afterWrites := e.json(t, ns)

	v, state, err := e.svc.State(ctxT(t), ns, v1.ID)
	must(t, err)
	if v.Label != "draft" || v.Kind != persistence.VersionManual {
		t.Fatalf("version %+v", v)
	}
	doc, err := registry.RenderJSON(state, registry.Root{Name: "t", Kind: yjs.KindText}, registry.Root{Name: "m", Kind: yjs.KindMap})
	must(t, err)
	b, _ := json.Marshal(doc)
	if string(b) != atV1 {
		t.Fatalf("version reads %s, the document read %s when it was taken", b, atV1)
	}

	head, err := e.feed.Head(ctxT(t))
	must(t, err)
	r, err := e.svc.Restore(ctxT(t), owner, ns, v1.ID)
	must(t, err)
	if !r.Changed || r.Before.Kind != persistence.VersionBeforeRestore || r.UpdateBytes == 0 {
		t.Fatalf("restore %+v", r)
	}
	if got := e.json(t, ns); got != atV1 {
		t.Fatalf("after the restore the document reads %s, want %s", got, atV1)
	}
	rd, err := e.feed.Open(ctxT(t), head)
	must(t, err)
	events, err := rd.Next(ctxT(t), 100)
	must(t, err)
	rd.Close()
	if n := len(events); n < 2 || events[n-2].Kind != persistence.ChangeUpdated || events[n-1].Kind != persistence.ChangeRestored {
		t.Fatalf("feed after the restore: %+v", events)
	}

	// Restoring the same version again changes nothing.
	again, err := e.svc.Restore(ctxT(t), owner, ns, v1.ID)
	must(t, err)
	if again.Changed {
		t.Fatalf("a second restore of the same version changed the document: %+v", again)
	}
	// Undo: restore the version taken before the restore.
	undo, err := e.svc.Restore(ctxT(t), owner, ns, r.Before.ID)
	must(t, err)
	if !undo.Changed {
		t.Fatal("the undo changed nothing")
	}
	if got := e.json(t, ns); got != afterWrites {
		t.Fatalf("after the undo the document reads %s, want %s", got, afterWrites)
	}
	list, err := e.svc.List(ctxT(t), ns)
	must(t, err)
	if len(list) != 3 {
		t.Fatalf("versions %+v, want the manual one and two before-restore ones", list)
	}
	_, _, err = e.svc.State(ctxT(t), ns, 99)
	if err != ErrNotFound {
		t.Fatalf("a missing version: %v", err)
	}
}

// A restore larger than the node's largest write is refused and writes nothing.
func TestRestoreTooLarge(t *testing.T) {
	e := newEnv(t, Options{MaxUpdateBytes: 64})
	c, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	ns := c.NamespaceID
	e.write(t, ns, setText(string(make([]byte, 500))))
	v, err := e.svc.Take(ctxT(t), owner, ns, "", persistence.VersionManual)
	must(t, err)
	e.write(t, ns, setText("short"))
	before := e.json(t, ns)
	if _, err := e.svc.Restore(ctxT(t), owner, ns, v.ID); err == nil {
		t.Fatal("a restore larger than the largest write was taken")
	}
	if got := e.json(t, ns); got != before {
		t.Fatalf("a refused restore changed the document: %s", got)
	}
}

// While a namespace is written, a version is taken every AutoEvery; an idle one gets none;
// only Keep automatic versions stay; the scheduler resumes after a restart from its cursor.
func TestAutomaticVersions(t *testing.T) {
	e := newEnv(t, Options{AutoEvery: 10 * time.Minute, Keep: 2})
	c, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	idle, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	ns := c.NamespaceID
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.svc.Run(ctx) }()
	stop := func() { cancel(); <-done }
	defer func() {
		select {
		case <-done:
		default:
			stop()
		}
	}()
	testkit.Eventually(t, 10*time.Second, "the scheduler started", func() bool {
		_, err := e.store.Config(ctxT(t), autoCursorKey)
		return err == nil
	})
	autos := func() int {
		list, err := e.svc.List(ctxT(t), ns)
		must(t, err)
		n := 0
		for _, v := range list {
			if v.Kind == persistence.VersionAuto {
				n++
			}
		}
		return n
	}
	advance := func(d time.Duration) {
		for step := time.Duration(0); step < d; step += time.Second {
			e.clk.Advance(time.Second)
			time.Sleep(time.Millisecond)
		}
	}
	for round := 1; round <= 3; round++ {
		e.write(t, ns, setText("round "+string(rune('0'+round))))
		testkit.Eventually(t, 10*time.Second, "the write is pending its version", func() bool { return e.svc.AutoStats().Pending == 1 })
		advance(10*time.Minute + 2*time.Second)
		want := min(round, 2)
		testkit.Eventually(t, 10*time.Second, "automatic versions after round", func() bool { return autos() == want })
	}
	if list, _ := e.svc.List(ctxT(t), idle.NamespaceID); len(list) != 0 {
		t.Fatalf("an idle namespace got versions: %+v", list)
	}
	// A write just before a restart gets its version after it.
	e.write(t, ns, setText("before the restart"))
	testkit.Eventually(t, 10*time.Second, "pending before the restart", func() bool { return e.svc.AutoStats().Pending == 1 })
	stop()
	svc2 := New(e.svc.opts)
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() { defer close(done2); svc2.Run(ctx2) }()
	defer func() { cancel2(); <-done2 }()
	testkit.Eventually(t, 10*time.Second, "the restarted scheduler found the write", func() bool { return svc2.AutoStats().Pending == 1 })
	advance(10*time.Minute + 2*time.Second)
	testkit.Eventually(t, 10*time.Second, "the version of the write before the restart", func() bool { return svc2.AutoStats().Taken == 1 })
}
