package persistencetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/persistence"
)

// FeedStore is a store with a change feed and versions (MemoryStore, BoltStore).
type FeedStore interface {
	persistence.Store
	persistence.ChangeFeed
	persistence.ChangeNoter
	persistence.VersionStore
}

// RunFeed runs the conformance suite of the change feed and the versions against the stores
// open makes (open must return a FeedStore).
func RunFeed(t *testing.T, open Factory) {
	s := suite{open: open}
	t.Run("FeedCoalescesAndOrders", s.feedCoalesces)
	t.Run("FeedIsWrittenWithTheCommit", s.feedWithTheCommit)
	t.Run("FeedNotesGivenLater", s.feedNotesLater)
	t.Run("FeedNoteNeverGiven", s.feedNoteNeverGiven)
	t.Run("FeedRetention", s.feedRetention)
	t.Run("FeedSnapshotsAndRecords", s.feedSnapshots)
	t.Run("FeedOff", s.feedOff)
	t.Run("FeedDeleteIsWrittenWithTheDelete", s.feedDelete)
	t.Run("Versions", s.versions)
}

// svOf is the test's StateVector: the first 8 bytes of a state (the tests only need it to
// be a function of the state).
func svOf(state []byte) ([]byte, error) {
	if len(state) > 8 {
		state = state[:8]
	}
	return append([]byte("sv:"), state...), nil
}

func feedOpts(o persistence.Options) persistence.Options {
	if o.ChangeFeed == nil {
		o.ChangeFeed = &persistence.ChangeFeedOptions{StateVector: svOf}
	}
	return o
}

func (s suite) feedStore(t *testing.T, o persistence.Options) FeedStore {
	st, ok := s.open(t, feedOpts(o)).(FeedStore)
	if !ok {
		t.Fatal("the store has no change feed or versions")
	}
	return st
}

func allChanges(t *testing.T, st FeedStore, after uint64) []persistence.Change {
	t.Helper()
	var out []persistence.Change
	for {
		page, _, err := st.Changes(ctxT(t), after, 3)
		must(t, err)
		if len(page) == 0 {
			return out
		}
		for _, c := range page {
			if c.Cursor <= after {
				t.Fatalf("cursor %d after %d", c.Cursor, after)
			}
			after = c.Cursor
		}
		out = append(out, page...)
	}
}

func wantChange(t *testing.T, c persistence.Change, kind persistence.ChangeKind, id string, sv []byte) {
	t.Helper()
	if c.Kind != kind || c.NamespaceID != id || c.Owner != owner || !bytes.Equal(c.StateVector, sv) {
		t.Fatalf("change %+v, want %v of %s with state vector %q", c, kind, id, sv)
	}
}

// Creation is one record (with the snapshot's state vector); the appends of one group
// commit are one record per namespace, ordered by each namespace's last append, with the
// state vector of the last noted append.
func (s suite) feedCoalesces(t *testing.T) {
	var f Faults // failing commits keep the appends queued: the retry commits them in one group
	st := s.feedStore(t, persistence.Options{CommitHook: f.Hook, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	a, b := ns(1), ns(2)
	wake := st.ChangesWake()
	start := time.Now()
	create(t, st, a, []byte("genesis-a"))
	select {
	case <-wake:
	default:
		t.Fatal("a creation did not wake the feed's readers")
	}
	create(t, st, b, nil)
	f.Fail(true)
	_, err := st.AppendNoted(owner, a, Update(a, 1), []byte("a1"))
	must(t, err)
	_, err = st.AppendNoted(owner, b, Update(b, 1), []byte("b1"))
	must(t, err)
	_, err = st.AppendNoted(owner, a, Update(a, 2), []byte("a2"))
	must(t, err)
	seq, err := st.Append(owner, b, Update(b, 2)) // no note: b keeps b1
	must(t, err)
	wake = st.ChangesWake()
	f.Fail(false)
	flushed(t, st, b, seq)
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("a commit did not wake the feed's readers")
	}
	got := allChanges(t, st, 0)
	if len(got) != 4 {
		t.Fatalf("%d records, want 4: %+v", len(got), got)
	}
	gsv, _ := svOf([]byte("genesis-a"))
	emptySV, _ := svOf(nil)
	wantChange(t, got[0], persistence.ChangeCreated, a, gsv)
	wantChange(t, got[1], persistence.ChangeCreated, b, emptySV)
	wantChange(t, got[2], persistence.ChangeUpdated, a, []byte("a2"))
	wantChange(t, got[3], persistence.ChangeUpdated, b, []byte("b1"))
	for i, c := range got {
		if c.Cursor != uint64(i+1) || c.At.Before(start.Truncate(time.Millisecond)) || c.At.After(time.Now()) {
			t.Fatalf("record %d: cursor %d at %v", i, c.Cursor, c.At)
		}
	}
	var latest []persistence.Change
	bounds, err := st.LatestChanges(ctxT(t), func(c persistence.Change) error { latest = append(latest, c); return nil })
	must(t, err)
	if bounds.Head != 4 || bounds.PrunedThrough != 0 || len(latest) != 2 || latest[0].Cursor != 3 || latest[1].Cursor != 4 {
		t.Fatalf("bounds %+v, latest %+v", bounds, latest)
	}
	page, _, err := st.Changes(ctxT(t), 4, 10)
	must(t, err)
	if len(page) != 0 {
		t.Fatalf("after the head: %+v", page)
	}
	_, _, err = st.Changes(ctxT(t), 5, 10)
	wantErr(t, err, persistence.ErrCursorExpired)
}

// A commit that fails writes no record; its retry writes them, once.
func (s suite) feedWithTheCommit(t *testing.T) {
	var f Faults
	st := s.feedStore(t, persistence.Options{CommitHook: f.Hook, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	id := ns(1)
	create(t, st, id, nil)
	f.Fail(true)
	for i := uint64(1); i <= 5; i++ {
		_, err := st.AppendNoted(owner, id, Update(id, i), []byte{byte(i)})
		must(t, err)
	}
	time.Sleep(20 * time.Millisecond)
	if got := allChanges(t, st, 1); len(got) != 0 {
		t.Fatalf("records of a failing commit: %+v", got)
	}
	f.Fail(false)
	flushed(t, st, id, 5)
	got := allChanges(t, st, 1)
	if len(got) == 0 || len(got) > 5 {
		t.Fatalf("%d records after the retried commit", len(got))
	}
	wantChange(t, got[len(got)-1], persistence.ChangeUpdated, id, []byte{5})
}

// Appends whose state vector is given afterwards (AppendNoteLater, NoteStateVector): the
// record of a group commit carries the state vector after the namespace's last append in
// it, never an earlier one, and an append whose note is still owed is committed only once
// it is given.
func (s suite) feedNotesLater(t *testing.T) {
	var f Faults // failing commits keep the appends queued: the retry commits them in one group
	st := s.feedStore(t, persistence.Options{CommitHook: f.Hook, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	a, b := ns(1), ns(2)
	create(t, st, a, nil)
	create(t, st, b, nil)
	f.Fail(true)
	a1, err := st.AppendNoteLater(owner, a, Update(a, 1))
	must(t, err)
	st.NoteStateVector(owner, a, a1, []byte("a1"))
	a2, err := st.AppendNoteLater(owner, a, Update(a, 2))
	must(t, err)
	b1, err := st.AppendNoteLater(owner, b, Update(b, 1))
	must(t, err)
	b2, err := st.AppendNoteLater(owner, b, Update(b, 2))
	must(t, err)
	st.NoteStateVector(owner, b, b2, []byte("b2")) // covers b1 too
	st.NoteStateVector(owner, a, a2, []byte("a2"))
	f.Fail(false)
	flushed(t, st, a, a2)
	flushed(t, st, b, b2)
	if b1 != 1 || b2 != 2 {
		t.Fatalf("sequence numbers %d, %d", b1, b2)
	}
	got := allChanges(t, st, 2)
	if len(got) != 2 {
		t.Fatalf("%d records of one group commit, want 2: %+v", len(got), got)
	}
	wantChange(t, got[0], persistence.ChangeUpdated, a, []byte("a2")) // not a1: stale
	wantChange(t, got[1], persistence.ChangeUpdated, b, []byte("b2"))

	// A note owed holds its append back until it is given; then the record has it.
	a3, err := st.AppendNoteLater(owner, a, Update(a, 3))
	must(t, err)
	done := make(chan error, 1)
	go func() { done <- st.WaitFlushed(ctxT(t), owner, a, a3) }()
	a4, err := st.AppendNoteLater(owner, a, Update(a, 4))
	must(t, err)
	st.NoteStateVector(owner, a, a4, []byte("a4"))
	must(t, <-done)
	flushed(t, st, a, a4)
	got = allChanges(t, st, 4)
	if len(got) != 1 {
		t.Fatalf("%d records after the note, want 1: %+v", len(got), got)
	}
	wantChange(t, got[0], persistence.ChangeUpdated, a, []byte("a4"))
}

// A note never given does not stop the store: after MaxNoteWait the append is committed,
// and its record has no state vector (none would be the one after it).
func (s suite) feedNoteNeverGiven(t *testing.T) {
	fc := clock.NewFake(t0)
	st := s.feedStore(t, persistence.Options{Clock: fc, CommitDelay: -1})
	a := ns(1)
	create(t, st, a, nil)
	a1, err := st.AppendNoted(owner, a, Update(a, 1), []byte("a1"))
	must(t, err)
	flushed(t, st, a, a1)
	a2, err := st.AppendNoteLater(owner, a, Update(a, 2))
	must(t, err)
	if !fc.WaitForTimers(1, 10*time.Second) {
		t.Fatal("the committer set no timer while a note was owed")
	}
	if f := st.Flushed(owner, a); f != a1 {
		t.Fatalf("flushed %d while the note of %d was owed", f, a2)
	}
	fc.Advance(persistence.MaxNoteWait)
	flushed(t, st, a, a2)
	got := allChanges(t, st, 1)
	if len(got) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(got), got)
	}
	wantChange(t, got[0], persistence.ChangeUpdated, a, []byte("a1"))
	wantChange(t, got[1], persistence.ChangeUpdated, a, nil)
}

// Records beyond MaxRecords, or older than MaxAge, go; a cursor before them is expired and
// LatestChanges still names every namespace.
func (s suite) feedRetention(t *testing.T) {
	fc := clock.NewFake(t0)
	st := s.feedStore(t, persistence.Options{Clock: fc, CommitDelay: -1,
		ChangeFeed: &persistence.ChangeFeedOptions{MaxRecords: 5, MaxAge: time.Hour, StateVector: svOf}})
	for i := 1; i <= 8; i++ {
		create(t, st, ns(i), nil)
	}
	got := allChanges(t, st, 3)
	if len(got) != 5 || got[0].Cursor != 4 {
		t.Fatalf("records kept: %+v", got)
	}
	_, b, err := st.Changes(ctxT(t), 2, 10)
	wantErr(t, err, persistence.ErrCursorExpired)
	if b.PrunedThrough != 3 || b.Head != 8 {
		t.Fatalf("bounds %+v", b)
	}
	n := 0
	_, err = st.LatestChanges(ctxT(t), func(persistence.Change) error { n++; return nil })
	must(t, err)
	if n != 8 {
		t.Fatalf("LatestChanges named %d namespaces, want 8", n)
	}
	fc.Advance(2 * time.Hour)
	_, err = st.RecordChange(ctxT(t), persistence.Change{Kind: persistence.ChangeDeleted, Owner: owner, NamespaceID: ns(1)})
	must(t, err)
	got = allChanges(t, st, 8)
	if len(got) != 1 || got[0].Cursor != 9 {
		t.Fatalf("after the age limit: %+v", got)
	}
	_, b, err = st.Changes(ctxT(t), 7, 10)
	wantErr(t, err, persistence.ErrCursorExpired)
	if b.PrunedThrough != 8 {
		t.Fatalf("bounds %+v", b)
	}
}

// ReplaceSnapshotNoted is a record (with the snapshot's state vector), ReplaceSnapshot and
// compaction are not; RecordChange is, in order.
func (s suite) feedSnapshots(t *testing.T) {
	st := s.feedStore(t, persistence.Options{Compactor: Concat})
	id := ns(1)
	create(t, st, id, nil)
	appendN(t, st, id, 1, 3)
	flushed(t, st, id, 3)
	head := uint64(len(allChanges(t, st, 0)))
	must(t, st.ReplaceSnapshot(ctxT(t), owner, id, Updates(id, 1, 3), 3))
	must(t, st.Compact(ctxT(t), owner, id))
	if got := allChanges(t, st, head); len(got) != 0 {
		t.Fatalf("a snapshot or a compaction wrote records: %+v", got)
	}
	must(t, st.ReplaceSnapshotNoted(ctxT(t), owner, id, []byte("saved-state"), 3))
	cur, err := st.RecordChange(ctxT(t), persistence.Change{Kind: persistence.ChangeRestored, Owner: owner, NamespaceID: id, StateVector: []byte("r")})
	must(t, err)
	got := allChanges(t, st, head)
	if len(got) != 2 || got[1].Cursor != cur {
		t.Fatalf("records %+v", got)
	}
	sv, _ := svOf([]byte("saved-state"))
	wantChange(t, got[0], persistence.ChangeUpdated, id, sv)
	wantChange(t, got[1], persistence.ChangeRestored, id, []byte("r"))
	_, err = st.RecordChange(ctxT(t), persistence.Change{Kind: 9, Owner: owner, NamespaceID: id})
	wantErr(t, err, persistence.ErrInvalid)
}

// A delete writes the namespace's "deleted" record (without a state vector) and drops its
// versions in the transaction that makes the entry a tombstone: a delete whose commit
// fails leaves the namespace, its versions and the feed as they were; one refused (deleted
// already) writes nothing.
func (s suite) feedDelete(t *testing.T) {
	var f Faults
	st := s.feedStore(t, persistence.Options{CommitHook: f.Hook})
	a, b := ns(1), ns(2)
	create(t, st, a, nil)
	create(t, st, b, nil)
	seq, err := st.AppendNoted(owner, a, Update(a, 1), []byte("a1"))
	must(t, err)
	flushed(t, st, a, seq)
	_, err = st.PutVersion(ctxT(t), persistence.Version{NamespaceID: a, Kind: persistence.VersionManual, Label: "v", CreatedAt: t0}, []byte("state"))
	must(t, err)
	before := allChanges(t, st, 0)

	f.Fail(true)
	if err := st.DeleteEntry(ctxT(t), owner, a); err == nil {
		t.Fatal("a delete whose commit failed succeeded")
	}
	f.Fail(false)
	if got := allChanges(t, st, 0); len(got) != len(before) {
		t.Fatalf("a failed delete changed the feed: %+v", got)
	}
	if ent, err := st.Entry(ctxT(t), a); err != nil || ent.State != persistence.StateActive {
		t.Fatalf("after a failed delete the entry is %+v, %v", ent, err)
	}
	if list, err := st.Versions(ctxT(t), a); err != nil || len(list) != 1 {
		t.Fatalf("after a failed delete the versions are %+v, %v", list, err)
	}

	wake := st.ChangesWake()
	must(t, st.DeleteEntry(ctxT(t), owner, a))
	select {
	case <-wake:
	default:
		t.Fatal("a delete did not wake the feed's readers")
	}
	got := allChanges(t, st, before[len(before)-1].Cursor)
	if len(got) != 1 {
		t.Fatalf("a delete wrote %d records, want 1: %+v", len(got), got)
	}
	wantChange(t, got[0], persistence.ChangeDeleted, a, nil)
	if list, err := st.Versions(ctxT(t), a); err != nil || len(list) != 0 {
		t.Fatalf("the versions of a deleted namespace: %+v, %v", list, err)
	}
	latest := map[string]persistence.ChangeKind{}
	_, err = st.LatestChanges(ctxT(t), func(c persistence.Change) error { latest[c.NamespaceID] = c.Kind; return nil })
	must(t, err)
	if latest[a] != persistence.ChangeDeleted || latest[b] != persistence.ChangeCreated {
		t.Fatalf("the newest change of each namespace: %v", latest)
	}

	wantErr(t, st.DeleteEntry(ctxT(t), owner, a), persistence.ErrNotFound)
	if more := allChanges(t, st, got[0].Cursor); len(more) != 0 {
		t.Fatalf("a refused delete wrote %+v", more)
	}
}

// Without Options.ChangeFeed nothing is recorded and the readers say so.
func (s suite) feedOff(t *testing.T) {
	st, ok := s.open(t, persistence.Options{}).(FeedStore)
	if !ok {
		t.Fatal("the store has no change feed")
	}
	create(t, st, ns(1), nil)
	if st.NotesWanted() {
		t.Fatal("NotesWanted without a feed")
	}
	_, _, err := st.Changes(ctxT(t), 0, 10)
	wantErr(t, err, persistence.ErrNoChangeFeed)
}

func (s suite) versions(t *testing.T) {
	st := s.feedStore(t, persistence.Options{Compactor: Concat})
	id := ns(1)
	create(t, st, id, nil)
	state := bytes.Repeat([]byte("state;"), 10000)
	v1, err := st.PutVersion(ctxT(t), persistence.Version{NamespaceID: id, Kind: persistence.VersionManual, Label: "first", CreatedAt: t0, StateVector: []byte{1, 2}}, state)
	must(t, err)
	v2, err := st.PutVersion(ctxT(t), persistence.Version{NamespaceID: id, Kind: persistence.VersionAuto, CreatedAt: t0.Add(time.Minute)}, []byte("second"))
	must(t, err)
	if v1.ID != 1 || v2.ID != 2 || v1.StateBytes != len(state) || !v1.CreatedAt.Equal(t0.Truncate(time.Millisecond)) {
		t.Fatalf("versions %+v %+v", v1, v2)
	}
	// Compaction leaves versions alone.
	appendN(t, st, id, 1, 5)
	flushed(t, st, id, 5)
	must(t, st.Compact(ctxT(t), owner, id))
	list, err := st.Versions(ctxT(t), id)
	must(t, err)
	if len(list) != 2 || list[0].Label != "first" || list[1].Kind != persistence.VersionAuto || !bytes.Equal(list[0].StateVector, []byte{1, 2}) {
		t.Fatalf("list %+v", list)
	}
	v, got, err := st.VersionState(ctxT(t), id, 1)
	must(t, err)
	if !bytes.Equal(got, state) || v.Label != "first" {
		t.Fatalf("version 1 reads back as %d bytes, %+v", len(got), v)
	}
	_, _, err = st.VersionState(ctxT(t), id, 3)
	wantErr(t, err, persistence.ErrNotFound)
	_, err = st.PutVersion(ctxT(t), persistence.Version{NamespaceID: id, Kind: persistence.VersionManual, Label: string(bytes.Repeat([]byte("x"), 2000))}, nil)
	wantErr(t, err, persistence.ErrInvalid)
	must(t, st.DeleteVersion(ctxT(t), id, 1))
	list, err = st.Versions(ctxT(t), id)
	must(t, err)
	if len(list) != 1 || list[0].ID != 2 {
		t.Fatalf("after deleting version 1: %+v", list)
	}
	v3, err := st.PutVersion(ctxT(t), persistence.Version{NamespaceID: id, Kind: persistence.VersionBeforeRestore, CreatedAt: t0}, []byte("third"))
	must(t, err)
	if v3.ID != 3 {
		t.Fatalf("a new version after a deleted one has id %d, want 3 (ids are never reused)", v3.ID)
	}
	must(t, st.DeleteVersions(ctxT(t), id))
	list, err = st.Versions(ctxT(t), id)
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("after DeleteVersions: %+v", list)
	}
	_, _, err = st.VersionState(ctxT(t), id, 2)
	if !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("VersionState after DeleteVersions: %v", err)
	}
}
