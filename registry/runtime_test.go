package registry

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// tickClock advances by one millisecond at every reading.
type tickClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// panicClock panics from its reading number after on.
type panicClock struct {
	after int32
	calls *atomic.Int32
}

func (c panicClock) Now() time.Time {
	if c.calls.Add(1) > c.after {
		panic("clock broke")
	}
	return time.Unix(0, 0)
}

func TestS23_4_StageTimingsOnlyWithAStageClock(t *testing.T) {
	tc := &tickClock{t: time.Unix(0, 0)}
	e := newEnv(t, RoleHub, Config{StageClock: tc}, persistence.Options{})
	_, l := e.create(t)
	s, _, err := openSession(t, l, SessionOptions{})
	must(t, err)
	cl := newClient(60)
	cl.sync(t, mustState(t, l, nil))
	res, err := s.Apply(ctxT(t), cl.set(t, "app", "k", 1.0))
	must(t, err)
	// admission, slot start, apply start, dirty start, dirty done: one tick apart.
	want := Stages{QueueWait: time.Millisecond, ProtectedCheck: time.Millisecond, LiveApply: time.Millisecond, DirtyNotify: time.Millisecond}
	if res.Stages == nil || *res.Stages != want {
		t.Fatalf("stages %+v, want %+v", res.Stages, want)
	}
	res, err = l.WriteLocal(ctxT(t), cl.set(t, "app", "k2", 1.0))
	must(t, err)
	if res.Stages == nil {
		t.Fatal("local writes have stages too")
	}

	// Without a stage clock, no stages.
	e2 := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l2 := e2.create(t)
	cl2 := newClient(61)
	cl2.sync(t, mustState(t, l2, nil))
	res, err = l2.WriteLocal(ctxT(t), cl2.set(t, "app", "k", 1.0))
	must(t, err)
	if res.Stages != nil {
		t.Fatal("stages without a stage clock")
	}
}

func TestS23_4_PanickingStageClockLeavesStagesOut(t *testing.T) {
	var calls atomic.Int32
	pc := panicClock{after: 2, calls: &calls}
	e := newEnv(t, RoleHub, Config{StageClock: pc}, persistence.Options{})
	_, l := e.create(t)
	cl := newClient(62)
	cl.sync(t, mustState(t, l, nil))
	res, err := l.WriteLocal(ctxT(t), cl.set(t, "app", "k", 1.0))
	must(t, err)
	if res.Stages != nil || !res.Changed {
		t.Fatalf("result %+v", res)
	}
}

func TestSequencerRunsSlotsInAdmissionOrder(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	s, _, err := openSession(t, l, SessionOptions{MaxInFlight: 1000})
	must(t, err)
	cl := newClient(63)
	cl.sync(t, mustState(t, l, nil))
	const n = 300
	var mu sync.Mutex
	var order []int
	done := make(chan struct{})
	for i := range n {
		u := cl.insertText(t, "t", i, "x")
		must(t, s.ApplyAsync(u, func(r ApplyResult, err error) {
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			order = append(order, i)
			if len(order) == n {
				close(done)
			}
			mu.Unlock()
		}))
	}
	<-done
	for i, v := range order {
		if v != i {
			t.Fatalf("slot %d completed in position %d", v, i)
		}
	}
}

func TestBrokenDocumentRefusesWorkUntilReloaded(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	c, l := e.create(t)
	s, _, err := openSession(t, l, SessionOptions{})
	must(t, err)
	cl := newClient(64)
	cl.sync(t, mustState(t, l, nil))
	_, err = s.Apply(ctxT(t), cl.set(t, "app", "k", 1.0))
	must(t, err)
	// A slot panics: the document is treated as broken.
	res := make(chan error, 1)
	must(t, enqueue(l.rt, nil, func(*nsRuntime, *slot) (int, error) { panic("boom") }, func(_ int, err error) { res <- err }))
	wantErr(t, <-res, ErrInternal)
	if !l.Failed() || !s.Poll().Failed {
		t.Fatal("failure not reported")
	}
	_, err = s.Apply(ctxT(t), cl.set(t, "app", "k2", 1.0))
	wantErr(t, err, ErrInternal)
	_, err = l.JSON(ctxT(t))
	wantErr(t, err, ErrInternal)
	// Once released, the namespace loads again from the store.
	s.Close()
	l.Release()
	waitFor(t, "unload", func() bool { return e.reg.Loaded() == 0 })
	l2, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	defer l2.Release()
	j, err := l2.JSON(ctxT(t), Root{"app", yjs.KindMap})
	must(t, err)
	if j["app"].(map[string]any)["k"] != 1.0 {
		t.Fatal("reloaded document lost a write")
	}
}

func TestCallbackPanicDoesNotBreakTheSequencer(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	must(t, l.WriteLocalAsync([]byte{0, 0}, func(ApplyResult, error) { panic("careless caller") }))
	_, err := l.StateVector(ctxT(t))
	must(t, err)
	if l.Failed() {
		t.Fatal("a caller's panic broke the document")
	}
}
