package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// hubWithSessions makes a hub namespace with n sessions and a synced client.
func hubWithSessions(t *testing.T, n int, opts SessionOptions) (*env, *Lease, []*Session, *client) {
	t.Helper()
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	var ss []*Session
	for range n {
		s, _, err := openSession(t, l, opts)
		must(t, err)
		ss = append(ss, s)
	}
	cl := newClient(100)
	state, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	cl.sync(t, state)
	return e, l, ss, cl
}

func TestS10_1_FanOutToOthersNotToOrigin(t *testing.T) {
	_, l, ss, cl := hubWithSessions(t, 3, SessionOptions{})
	w, err := l.Watch(0, 0)
	must(t, err)
	defer w.Close()
	a, b, c := ss[0], ss[1], ss[2]
	var sent [][]byte
	for i := range 5 {
		u := cl.insertText(t, "text", i, "x")
		sent = append(sent, u)
		res, err := a.Apply(ctxT(t), u)
		must(t, err)
		if !res.Changed || res.Seq == 0 {
			t.Fatalf("apply %d: %+v", i, res)
		}
	}
	if p := a.Poll(); len(p.Updates) != 0 {
		t.Fatalf("origin session got %d echoes", len(p.Updates))
	}
	pb, pc, pw := b.Poll(), c.Poll(), w.Poll()
	if len(pb.Updates) != 5 || len(pc.Updates) != 5 || len(pw.Updates) != 5 {
		t.Fatalf("fan-out counts %d %d %d", len(pb.Updates), len(pc.Updates), len(pw.Updates))
	}
	for i := range 5 {
		// One immutable update shared by every subscriber.
		if pb.Updates[i] != pc.Updates[i] || pb.Updates[i] != pw.Updates[i] {
			t.Fatal("subscribers got different updates")
		}
	}
	// In sequencer order: applied in order they rebuild the client's text.
	got := docOf(t, updateBytes(pb.Updates)...)
	if got.GetText("text").String() != "xxxxx" {
		t.Fatalf("fan-out replays to %q", got.GetText("text").String())
	}
	select {
	case <-b.Wake():
	default:
		t.Fatal("Wake not signalled")
	}
	sameDoc(t, docOf(t, sent...), got)
}

func mustState(t testing.TB, l *Lease, sv []byte) []byte {
	t.Helper()
	b, err := l.EncodeState(ctxT(t), sv)
	must(t, err)
	return b
}

func TestS10_1_LocalWritesReachEverySession(t *testing.T) {
	_, l, ss, cl := hubWithSessions(t, 2, SessionOptions{})
	u := cl.set(t, "app", "k", "v")
	_, err := l.WriteLocal(ctxT(t), u)
	must(t, err)
	for _, s := range ss {
		if p := s.Poll(); len(p.Updates) != 1 {
			t.Fatalf("session got %d updates", len(p.Updates))
		}
	}
}

func TestS10_1_NotifyCallbackRunsWithoutBlocking(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	inbox := make(chan struct{}, 1)
	var calls int
	var mu sync.Mutex
	b, _, err := openSession(t, l, SessionOptions{Notify: func() {
		mu.Lock()
		calls++
		mu.Unlock()
		select {
		case inbox <- struct{}{}:
		default:
		}
	}})
	must(t, err)
	cl := newClient(1)
	cl.sync(t, mustState(t, l, nil))
	for i := range 3 {
		_, err := l.WriteLocal(ctxT(t), cl.set(t, "app", "k", float64(i)))
		must(t, err)
	}
	<-inbox
	mu.Lock()
	defer mu.Unlock()
	if calls != 3 || len(b.Poll().Updates) != 3 {
		t.Fatalf("notify called %d times", calls)
	}
}

// docs/protocol.md#document-layout: a write held pending in the document and released by a
// remote update must reach the remote too, although the transaction's origin is the remote
// session.
func TestGuide4_ReleasedPendingStructsReachTheOriginSession(t *testing.T) {
	e := newReplica(t, Config{}, persistence.Options{})
	start, pl, hubSess := e.start, e.pl, e.ps

	// H is made at the hub side; L is a local write made after it by an application that
	// already saw H.
	author := newClient(200)
	author.sync(t, start.Snapshot)
	h := author.insertText(t, "text", 0, "hello")
	editor := newClient(300)
	editor.sync(t, start.Snapshot)
	editor.sync(t, h)
	localWrite := editor.insertText(t, "text", 5, " world")

	// L reaches the peer first: it waits as pending and changes nothing yet.
	res, err := pl.WriteLocal(ctxT(t), localWrite)
	must(t, err)
	if res.Changed {
		t.Fatal("a write with missing dependencies changed the document")
	}
	if p := hubSess.Poll(); len(p.Updates) != 0 {
		t.Fatal("pending write fanned out")
	}
	// H arrives from the hub: the transaction integrates H and the released L.
	res, err = hubSess.Apply(ctxT(t), h)
	must(t, err)
	if !res.Changed {
		t.Fatal("hub update changed nothing")
	}
	p := hubSess.Poll()
	if len(p.Updates) != 1 {
		t.Fatalf("origin session got %d updates, want the released write", len(p.Updates))
	}
	// What the hub lacks (L) is in it: the hub, which has H, converges by applying it.
	hubDoc := docOf(t, start.Snapshot, h)
	must(t, yjs.ApplyUpdate(hubDoc, p.Updates[0].Bytes(), nil))
	if got := hubDoc.GetText("text").String(); got != "hello world" {
		t.Fatalf("hub side after the forwarded update: %q", got)
	}
	// Without pending structs the origin is not echoed.
	_, err = hubSess.Apply(ctxT(t), author.insertText(t, "text", 0, ">"))
	must(t, err)
	if p := hubSess.Poll(); len(p.Updates) != 0 {
		t.Fatal("echo without pending structs")
	}
}

func TestS17_FanOutOverflowDropsAllAndSignalsResyncUntilDiff(t *testing.T) {
	_, l, ss, cl := hubWithSessions(t, 1, SessionOptions{MaxQueuedUpdateCount: 3})
	writer := func(k string) {
		_, err := l.WriteLocal(ctxT(t), cl.set(t, "app", k, k))
		must(t, err)
	}
	s := ss[0]
	writer("a")
	writer("b")
	writer("c")
	writer("d") // overflows
	writer("e") // dropped, not queued
	p := s.Poll()
	if !p.NeedsResync || len(p.Updates) != 0 {
		t.Fatalf("after overflow: %d updates, resync %v", len(p.Updates), p.NeedsResync)
	}
	if p := s.Poll(); p.NeedsResync {
		t.Fatal("needs-resync reported twice")
	}
	// The next Diff covers everything dropped and re-arms the queue.
	diff, err := s.Diff(ctxT(t), []byte{0})
	must(t, err)
	if got := docOf(t, diff).GetMap("app").Len(); got != 5 {
		t.Fatalf("diff has %d keys", got)
	}
	writer("f")
	if p := s.Poll(); len(p.Updates) != 1 || p.NeedsResync {
		t.Fatalf("after re-arm: %+v", p)
	}
	// The byte bound works the same way.
	_, l2, ss2, cl2 := hubWithSessions(t, 1, SessionOptions{MaxQueuedUpdateBytes: 64})
	_, err = l2.WriteLocal(ctxT(t), cl2.set(t, "app", "big", string(bytes.Repeat([]byte("x"), 100))))
	must(t, err)
	if p := ss2[0].Poll(); !p.NeedsResync || len(p.Updates) != 0 {
		t.Fatal("byte overflow not signalled")
	}
}

func TestS11_EpochBumpFencesOldSessionsInOrder(t *testing.T) {
	e, l, ss, cl := hubWithSessions(t, 2, SessionOptions{})
	a, b := ss[0], ss[1]
	w, err := l.Watch(0, 0)
	must(t, err)
	defer w.Close()
	old := l.Identity()

	unblock := block(t, l)
	type result struct {
		res ApplyResult
		err error
	}
	u1, u2 := make(chan result, 1), make(chan result, 1)
	must(t, a.ApplyAsync(cl.set(t, "app", "before", 1.0), func(r ApplyResult, err error) { u1 <- result{r, err} }))
	bumped := make(chan Identity, 1)
	go func() {
		id, err := l.BumpEpoch(ctxT(t))
		if err != nil {
			t.Error(err)
		}
		bumped <- id
	}()
	waitFor(t, "the bump to be admitted", func() bool { return queued(l) == 2 })
	// Admitted after the bump: refused at the start of its slot.
	must(t, a.ApplyAsync(cl.set(t, "app", "after", 1.0), func(r ApplyResult, err error) { u2 <- result{r, err} }))
	unblock()

	r1 := <-u1
	must(t, r1.err)
	id := <-bumped
	if id.Epoch != old.Epoch+1 || id.ReplicationID != old.ReplicationID {
		t.Fatalf("bumped to %v from %v", id, old)
	}
	r2 := <-u2
	wantErr(t, r2.err, ErrFenced)
	if CodeOf(r2.err) != CodeReplicationEpochMismatch {
		t.Fatal(CodeOf(r2.err))
	}
	// Both sessions were fenced, and saw the earlier update but not the bump.
	for _, s := range []*Session{a, b} {
		p := s.Poll()
		if p.Fenced == nil || *p.Fenced != id {
			t.Fatalf("session not fenced: %+v", p)
		}
		if len(p.Updates) != 0 {
			t.Fatalf("a fenced session keeps %d queued updates", len(p.Updates))
		}
		_, err := s.StateVector(ctxT(t))
		wantErr(t, err, ErrFenced)
	}
	// The watcher saw the update and the bump.
	if p := w.Poll(); len(p.Updates) != 2 || p.Fenced != nil {
		t.Fatalf("watcher: %+v", p)
	}
	if l.Identity() != id {
		t.Fatal("lease identity not updated")
	}
	if infos := l.Sessions(); len(infos) != 2 || !infos[0].Fenced || !infos[1].Fenced || infos[0].Epoch != old.Epoch {
		t.Fatalf("sessions after the bump: %+v", infos)
	}
	// A session declaring the old identity is refused; the new one opens and works.
	_, _, err = openSession(t, l, SessionOptions{Expect: &old})
	wantErr(t, err, ErrEpochMismatch)
	otherID := Identity{ReplicationID: "0123456789abcdef0123456789abcdef", Epoch: id.Epoch}
	_, _, err = openSession(t, l, SessionOptions{Expect: &otherID})
	wantErr(t, err, ErrIDMismatch)
	s3, st, err := openSession(t, l, SessionOptions{Expect: &id, Peer: "peer-c"})
	must(t, err)
	if infos := l.Sessions(); len(infos) != 3 || infos[2] != (SessionInfo{Peer: "peer-c", Epoch: id.Epoch}) {
		t.Fatalf("sessions: %+v", infos)
	}
	if st.Identity != id {
		t.Fatal("new session identity")
	}
	_, err = s3.Apply(ctxT(t), cl.set(t, "app", "new", 1.0))
	must(t, err)
	// The new epoch is stored.
	l.Release()
	waitFor(t, "unload", func() bool { return e.reg.Loaded() == 0 })
	l2, err := e.reg.Open(ctxT(t), owner, l.NamespaceID())
	must(t, err)
	defer l2.Release()
	if l2.Identity() != id {
		t.Fatalf("reloaded identity %v", l2.Identity())
	}
}

func TestS11_EpochBumpIsHubOnly(t *testing.T) {
	hub := newEnv(t, RoleHub, Config{}, persistence.Options{})
	c, hl := hub.create(t)
	_, start, err := openSession(t, hl, SessionOptions{Snapshot: true})
	must(t, err)
	peer := newEnv(t, RolePeer, Config{}, persistence.Options{})
	pl, err := peer.reg.Import(ctxT(t), owner, c.NamespaceID, start.Identity, start.Snapshot)
	must(t, err)
	defer pl.Release()
	_, err = pl.BumpEpoch(ctxT(t))
	wantErr(t, err, ErrRoleViolation)
	err = pl.ReplaceSchema(ctxT(t), "now", map[string]any{})
	wantErr(t, err, ErrRoleViolation)
}

func TestSchemaReplaceReachesPeers(t *testing.T) {
	hub := newEnv(t, RoleHub, Config{}, persistence.Options{})
	c, hl := hub.create(t)
	hs, start, err := openSession(t, hl, SessionOptions{Snapshot: true})
	must(t, err)
	def := map[string]any{"type": "object", "fields": []any{"a", "b"}}
	must(t, hl.ReplaceSchema(ctxT(t), "2026-11-29T00:00:00Z", def))
	s, ok, err := hl.Schema(ctxT(t))
	must(t, err)
	if !ok || s.UpdatedAt != "2026-11-29T00:00:00Z" || len(s.Definition) != 2 {
		t.Fatalf("schema %+v %v", s, ok)
	}
	p := hs.Poll()
	if len(p.Updates) != 1 {
		t.Fatalf("schema update fanned out %d times", len(p.Updates))
	}
	// A peer applies it through its hub session (trusted, meta included).
	peer := newEnv(t, RolePeer, Config{}, persistence.Options{})
	pl, err := peer.reg.Import(ctxT(t), owner, c.NamespaceID, start.Identity, start.Snapshot)
	must(t, err)
	defer pl.Release()
	ps, _, err := openSession(t, pl, SessionOptions{Expect: &start.Identity})
	must(t, err)
	_, err = ps.Apply(ctxT(t), p.Updates[0].Bytes())
	must(t, err)
	ps2, ok, err := pl.Schema(ctxT(t))
	must(t, err)
	if !ok || !reflect.DeepEqual(ps2, s) {
		t.Fatalf("peer schema %+v", ps2)
	}
	if pl.Identity() != start.Identity {
		t.Fatal("identity changed")
	}
}

func TestSessionLimitsAndRoles(t *testing.T) {
	_, l, _, cl := hubWithSessions(t, 0, SessionOptions{})
	ro, _, err := openSession(t, l, SessionOptions{ReadOnly: true})
	must(t, err)
	_, err = ro.Apply(ctxT(t), cl.set(t, "app", "k", 1.0))
	wantErr(t, err, ErrRoleViolation)
	if CodeOf(err) != CodeRoleViolation {
		t.Fatal(CodeOf(err))
	}
	// A read-only session still reads.
	_, err = ro.StateVector(ctxT(t))
	must(t, err)

	s, _, err := openSession(t, l, SessionOptions{MaxInFlight: 2})
	must(t, err)
	unblock := block(t, l)
	done := make(chan error, 2)
	must(t, s.StateVectorAsync(func(_ []byte, err error) { done <- err }))
	must(t, s.DiffAsync(nil, func(_ []byte, err error) { done <- err }))
	wantErr(t, s.StateVectorAsync(func([]byte, error) { t.Error("refused op ran") }), ErrOverloaded)
	unblock()
	must(t, <-done)
	must(t, <-done)
	// Admission frees up once operations settle.
	_, err = s.StateVector(ctxT(t))
	must(t, err)
}

func TestSessionCloseLetsAdmittedWorkSettle(t *testing.T) {
	_, l, ss, cl := hubWithSessions(t, 1, SessionOptions{})
	s := ss[0]
	unblock := block(t, l)
	res := make(chan error, 1)
	must(t, s.ApplyAsync(cl.set(t, "app", "k", 1.0), func(_ ApplyResult, err error) { res <- err }))
	s.Close()
	s.Close()
	select {
	case <-s.Settled():
		t.Fatal("settled with an admitted apply outstanding")
	default:
	}
	wantErr(t, s.ApplyAsync(cl.set(t, "app", "x", 1.0), func(ApplyResult, error) {}), ErrClosed)
	unblock()
	must(t, <-res) // admitted before Close: applied unconditionally (docs/protocol.md#closing-a-namespace)
	<-s.Settled()
	j, err := l.JSON(ctxT(t), Root{"app", yjs.KindMap})
	must(t, err)
	if !reflect.DeepEqual(j["app"], map[string]any{"k": 1.0}) {
		t.Fatalf("app = %v", j["app"])
	}
	if !s.Poll().Closed {
		t.Fatal("closed session not marked closed")
	}
}

func TestSessionSnapshotIsConsistentWithTheStream(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	cl := newClient(4)
	cl.sync(t, mustState(t, l, nil))
	writer, _, err := openSession(t, l, SessionOptions{MaxInFlight: 256})
	must(t, err)
	var ups [][]byte
	for i := range 200 {
		ups = append(ups, cl.insertText(t, "t", i, "a"))
	}
	// A bootstrap session opens between writes: the snapshot plus the updates queued after
	// it are exactly the document.
	unblock := block(t, l)
	done := make(chan error, len(ups))
	submit := func(us [][]byte) {
		for _, u := range us {
			must(t, writer.ApplyAsync(u, func(_ ApplyResult, err error) { done <- err }))
		}
	}
	submit(ups[:100])
	type opened struct {
		s   *Session
		st  SessionStart
		err error
	}
	op := make(chan opened, 1)
	go func() {
		s, st, err := l.OpenSession(ctxT(t), SessionOptions{Snapshot: true, StateVector: true})
		op <- opened{s, st, err}
	}()
	waitFor(t, "the open to be admitted", func() bool { return queued(l) == 101 })
	submit(ups[100:])
	unblock()
	o := <-op
	must(t, o.err)
	defer o.s.Close()
	for range ups {
		must(t, <-done)
	}
	d := docOf(t, o.st.Snapshot)
	if got := d.GetText("t").String(); len(got) != 100 {
		t.Fatalf("snapshot has %d of the writes, want the 100 admitted before it", len(got))
	}
	if !bytes.Equal(d.EncodeStateVector(), o.st.StateVector) {
		t.Fatal("snapshot and state vector from different points")
	}
	p := o.s.Poll()
	if len(p.Updates) != 100 {
		t.Fatalf("%d updates queued after the snapshot, want 100", len(p.Updates))
	}
	for _, u := range p.Updates {
		must(t, yjs.ApplyUpdate(d, u.Bytes(), nil))
	}
	sameDoc(t, d, leaseDoc(t, l))
}

func TestOpenSessionAbandonedByItsContextRegistersNothing(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := e.create(t)
	unblock := block(t, l)
	ctx, cancel := context.WithCancel(ctxT(t))
	errc := make(chan error, 1)
	go func() {
		_, _, err := l.OpenSession(ctx, SessionOptions{Peer: "late"})
		errc <- err
	}()
	waitFor(t, "the open to be admitted", func() bool { return queued(l) == 1 })
	cancel()
	wantErr(t, <-errc, context.Canceled)
	unblock()
	_, err := l.StateVector(ctxT(t)) // after the opening slot
	must(t, err)
	if infos := l.Sessions(); len(infos) != 0 {
		t.Fatalf("abandoned session registered: %+v", infos)
	}
	// The asynchronous form reports on the sequencer goroutine.
	got := make(chan *Session, 1)
	must(t, l.OpenSessionAsync(SessionOptions{Peer: "async"}, func(s *Session, st SessionStart, err error) {
		if err != nil || st.Identity != l.Identity() {
			t.Errorf("async open: %v %v", st, err)
		}
		got <- s
	}))
	s := <-got
	defer s.Close()
	if infos := l.Sessions(); len(infos) != 1 || infos[0].Peer != "async" {
		t.Fatalf("sessions %+v", infos)
	}
	bad := Identity{ReplicationID: l.Identity().ReplicationID, Epoch: 9}
	must(t, l.OpenSessionAsync(SessionOptions{Expect: &bad}, func(s *Session, _ SessionStart, err error) {
		if s != nil || !errors.Is(err, ErrEpochMismatch) {
			t.Errorf("mismatch: %v %v", s, err)
		}
		got <- nil
	}))
	<-got
}

// TestGuardedMetaChanges: an epoch bump or schema replacement that names what it replaces
// is made only if the namespace is still in that state, checked in the change's own slot:
// of several that expect the same state, started at once, exactly one is made and the
// others get ErrChanged, having written nothing.
func TestGuardedMetaChanges(t *testing.T) {
	hub := newEnv(t, RoleHub, Config{}, persistence.Options{})
	_, l := hub.create(t)
	start := l.Identity()
	var wg sync.WaitGroup
	results := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = l.BumpEpochFrom(ctxT(t), start.Epoch)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range results {
		if err == nil {
			won++
		} else {
			wantErr(t, err, ErrChanged)
		}
	}
	if won != 1 || l.Identity().Epoch != start.Epoch+1 {
		t.Fatalf("%d bumps from epoch %d were made; epoch now %d", won, start.Epoch, l.Identity().Epoch)
	}
	_, err := l.BumpEpochFrom(ctxT(t), start.Epoch+5)
	wantErr(t, err, ErrChanged)
	if l.Identity().Epoch != start.Epoch+1 {
		t.Fatal("a refused bump changed the epoch")
	}

	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = l.ReplaceSchemaFrom(ctxT(t), "", "t", map[string]any{"n": float64(i)})
		}()
	}
	wg.Wait()
	won = 0
	for _, err := range results {
		if err == nil {
			won++
		} else {
			wantErr(t, err, ErrChanged)
		}
	}
	first, ok := l.ActiveSchema()
	if won != 1 || !ok {
		t.Fatalf("%d schema replacements expecting none were made", won)
	}
	wantErr(t, l.ReplaceSchemaFrom(ctxT(t), "sha256:v1:other", "t2", map[string]any{"x": "y"}), ErrChanged)
	must(t, l.ReplaceSchemaFrom(ctxT(t), first.Fingerprint, "t2", map[string]any{"x": "y"}))
	if s, _ := l.ActiveSchema(); s.UpdatedAt != "t2" {
		t.Fatalf("the replacement expecting the active schema was not made: %+v", s)
	}
}

// A Poll's list stays as it was until the next Poll (which reuses its array for the updates
// that follow): what arrives in between, and later, is delivered whole and in order.
func TestSubscriptionPollListsStayIntact(t *testing.T) {
	s := newSubscription(true, 1, 1<<20, 1024, nil)
	u := func(i int) []byte { return []byte{byte(i)} }
	next := 0
	push := func(n int) (want [][]byte) {
		for range n {
			s.push(yjs.Share(u(next)))
			want = append(want, u(next))
			next++
		}
		return want
	}
	same := func(what string, got []*yjs.Shared, want [][]byte) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d updates, want %d", what, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i].Bytes(), want[i]) {
				t.Fatalf("%s: update %d is %v, want %v", what, i, got[i].Bytes(), want[i])
			}
		}
	}
	var held []*yjs.Shared
	var wantHeld [][]byte
	for round, n := range []int{3, 5, 1, 0, 40, 2, 300, 7} {
		want := push(n)
		if held != nil {
			same(fmt.Sprintf("round %d: the previous poll's list after more pushes", round), held, wantHeld)
		}
		p := s.poll()
		same(fmt.Sprintf("round %d", round), p.Updates, want)
		held, wantHeld = p.Updates, want
	}
}
