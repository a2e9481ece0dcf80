package persistence

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// The change feed: one ordered, durable list of what happened to the namespaces of a store
// — created, updated, restored, deleted — each with the namespace's state vector after
// the change, numbered by a cursor that only grows. It is written in the transactions that
// make the changes durable: a namespace's creation in CreateEntry's transaction, its
// deletion in the transaction that makes its entry a tombstone, and one "updated" record
// per namespace in each group commit that appended updates to it (several appends share
// one record: the feed coalesces). So a change that is durable is in the
// feed, and a reader that resumes after any cursor, even after a crash, misses nothing
// after it. Only a store opened with Options.ChangeFeed keeps one.
//
// Old records are dropped by Options.ChangeFeed's retention (by age and by count), a few
// hundred per commit; a reader whose cursor is older than the oldest kept gets
// ErrCursorExpired, and starts over from LatestChanges — the newest record of every
// namespace, and the cursor to follow from.

// ChangeKind is what happened to a namespace.
type ChangeKind uint8

// Change kinds.
const (
	ChangeCreated  ChangeKind = 1
	ChangeUpdated  ChangeKind = 2
	ChangeRestored ChangeKind = 3 // a restore of a version was written (an updated record precedes it)
	ChangeDeleted  ChangeKind = 4
)

func (k ChangeKind) String() string {
	switch k {
	case ChangeCreated:
		return "created"
	case ChangeUpdated:
		return "updated"
	case ChangeRestored:
		return "restored"
	case ChangeDeleted:
		return "deleted"
	}
	return "ChangeKind(" + strconv.Itoa(int(k)) + ")"
}

// ParseChangeKind is the inverse of ChangeKind.String.
func ParseChangeKind(s string) (ChangeKind, bool) {
	for k := ChangeCreated; k <= ChangeDeleted; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// Change is one record of the change feed.
type Change struct {
	Cursor      uint64 // its place in the feed: 1, 2, … (assigned by the store)
	Kind        ChangeKind
	Owner       string
	NamespaceID string
	// StateVector is the namespace's encoded Yjs state vector after the change (nil when
	// whoever made the change could not say, and for a deletion).
	StateVector []byte
	At          time.Time // when the store wrote it (milliseconds)
}

// ChangeFeedOptions turn the change feed of a store on (Options.ChangeFeed).
type ChangeFeedOptions struct {
	// MaxAge drops records older than this (zero: DefaultChangeMaxAge; negative: kept
	// whatever their age).
	MaxAge time.Duration
	// MaxRecords drops the oldest records beyond this many (zero: DefaultChangeMaxRecords;
	// negative: no bound).
	MaxRecords int
	// StateVector returns the encoded state vector of a document's whole state (a
	// snapshot): the store reads no Yjs, and asks it for the record of a creation and of a
	// snapshot saved by ReplaceSnapshotNoted. Nil leaves those records without one.
	StateVector func(state []byte) ([]byte, error)
}

// Defaults of ChangeFeedOptions.
const (
	DefaultChangeMaxAge     = 7 * 24 * time.Hour
	DefaultChangeMaxRecords = 1_000_000
	// pruneBatch bounds the records one transaction drops.
	pruneBatch = 512
)

// ChangeBounds say which cursors a reader may resume after: those from PrunedThrough (every
// record after it is kept) to Head (the newest record; 0 when the feed never had one).
type ChangeBounds struct {
	PrunedThrough uint64
	Head          uint64
}

// Valid reports whether a reader may resume after cursor.
func (b ChangeBounds) Valid(cursor uint64) bool {
	return cursor >= b.PrunedThrough && cursor <= b.Head
}

// ErrCursorExpired: a change-feed cursor older than the oldest record kept (or newer than
// the newest: not one of this store's). The reader starts over from LatestChanges.
var ErrCursorExpired = errors.New("persistence: change-feed cursor is outside the records kept")

// ErrNoChangeFeed: the store was opened without Options.ChangeFeed.
var ErrNoChangeFeed = errors.New("persistence: this store keeps no change feed")

// ChangeFeed is what a store with a change feed offers its readers. MemoryStore and
// BoltStore implement it (ErrNoChangeFeed unless opened with Options.ChangeFeed).
type ChangeFeed interface {
	// Changes returns up to limit records after cursor after, oldest first, and the feed's
	// bounds as read; a cursor outside them is ErrCursorExpired.
	Changes(ctx context.Context, after uint64, limit int) ([]Change, ChangeBounds, error)
	// LatestChanges calls fn with the newest record of every namespace and returns the
	// bounds of the same read (where to follow from after starting over).
	LatestChanges(ctx context.Context, fn func(Change) error) (ChangeBounds, error)
	// ChangesWake returns a channel closed when records are committed after the call.
	ChangesWake() <-chan struct{}
	// RecordChange writes a record no append carries (a restore).
	RecordChange(ctx context.Context, c Change) (uint64, error)
}

var _ ChangeFeed = (*engine)(nil)

// ChangeNoter is what the registry asks of a Documents that keeps a change feed: the state
// vector after each append (the store reads no Yjs) and the marking of a saved snapshot as a
// change. MemoryStore and BoltStore implement it.
type ChangeNoter interface {
	// NotesWanted reports whether the store keeps a change feed (without one, the notes
	// are not worth computing).
	NotesWanted() bool
	// AppendNoted is Append with the namespace's encoded state vector after the update:
	// the "updated" record of the group commit that makes it durable carries the state
	// vector of the last append of the namespace in it.
	AppendNoted(owner, namespaceID string, update, stateVector []byte) (uint64, error)
	// AppendNoteLater is Append whose state vector the caller gives afterwards with
	// NoteStateVector, for this append or a later one of the namespace, so that a caller
	// making many appends encodes its state vector once for all of them rather than once
	// for each. No group commit ends a namespace's appends with one that still awaits its
	// note: the committer commits the longest run at the head of its queue after which
	// every namespace's last append has its state vector, and waits for notes when there
	// is none. A caller must therefore give the note soon (before it waits for anything),
	// and never wait for its own appends to commit while it owes one; a note not given
	// within MaxNoteWait is given up: the record of that commit has no state vector.
	AppendNoteLater(owner, namespaceID string, update []byte) (uint64, error)
	// NoteStateVector gives the namespace's encoded state vector after its append seq
	// (made with AppendNoteLater); it is the note of the commit that ends with seq or any
	// later append up to the next noted one. A note for an append already committed, or
	// of a namespace no longer loaded, is dropped.
	NoteStateVector(owner, namespaceID string, seq uint64, stateVector []byte)
	// ReplaceSnapshotNoted is ReplaceSnapshot of a snapshot that saves changes no append
	// holds (the store had refused them): it writes an "updated" record with the
	// snapshot's state vector in the same transaction.
	ReplaceSnapshotNoted(ctx context.Context, owner, namespaceID string, snapshot []byte, through uint64) error
}

var _ ChangeNoter = (*engine)(nil)

// NotesWanted implements ChangeNoter.
func (e *engine) NotesWanted() bool { return e.opts.ChangeFeed != nil }

// AppendNoted implements ChangeNoter.
func (e *engine) AppendNoted(owner, ns string, update, stateVector []byte) (uint64, error) {
	return e.appendOp(owner, ns, update, stateVector, false)
}

// AppendNoteLater implements ChangeNoter.
func (e *engine) AppendNoteLater(owner, ns string, update []byte) (uint64, error) {
	return e.appendOp(owner, ns, update, nil, true)
}

// MaxNoteWait bounds how long the committer waits for notes owed (AppendNoteLater) before it
// commits without them: a caller that never gives one cannot stop the store.
const MaxNoteWait = time.Second

// NoteStateVector implements ChangeNoter. The append is looked for from the tail of the
// queue (a caller gives its note soon after its last append), among the operations the
// committer has not taken.
func (e *engine) NoteStateVector(owner, ns string, seq uint64, stateVector []byte) {
	note := append(make([]byte, 0, len(stateVector)), stateVector...)
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.res[docKey{owner, ns}]
	if r == nil || r.pending == 0 || seq > r.assigned {
		return
	}
	for i := len(e.q) - 1; i >= e.taken; i-- {
		o := &e.q[i]
		if o.kind != opAppend || o.r != r {
			continue
		}
		if o.seq < seq {
			return // committed already
		}
		if o.seq == seq {
			o.note, o.noteLater = note, false
			if e.heldForNote {
				e.heldForNote = false
				e.wake()
			}
			return
		}
	}
}

// ReplaceSnapshotNoted implements ChangeNoter.
func (e *engine) ReplaceSnapshotNoted(ctx context.Context, owner, ns string, snapshot []byte, through uint64) error {
	return e.replaceSnapshot(ctx, owner, ns, snapshot, through, true)
}

// feedOn reports whether the store keeps a change feed.
func (e *engine) feedOn() bool { return e.opts.ChangeFeed != nil }

// stateVectorOf asks the feed's StateVector for a whole state's (nil when it cannot say).
func (e *engine) stateVectorOf(state []byte) []byte {
	f := e.opts.ChangeFeed
	if f == nil || f.StateVector == nil {
		return nil
	}
	var sv []byte
	notify(func() {
		var err error
		if sv, err = f.StateVector(state); err != nil {
			sv = nil
		}
	})
	return sv
}

// writeChange adds a record to the feed inside a write transaction, and drops old ones.
func (e *engine) writeChange(w writer, c Change) error {
	c.At = e.opts.Clock.Now().Truncate(time.Millisecond)
	if _, err := w.putChange(c); err != nil {
		return err
	}
	return e.pruneChanges(w)
}

// pruneChanges drops at most pruneBatch records beyond the retention, oldest first.
func (e *engine) pruneChanges(w writer) error {
	f := e.opts.ChangeFeed
	maxAge, maxRecords := f.MaxAge, f.MaxRecords
	if maxAge == 0 {
		maxAge = DefaultChangeMaxAge
	}
	if maxRecords == 0 {
		maxRecords = DefaultChangeMaxRecords
	}
	var before time.Time
	if maxAge > 0 {
		before = e.opts.Clock.Now().Add(-maxAge)
	}
	return w.pruneChanges(before, maxRecords, pruneBatch)
}

// changesCommitted wakes the readers waiting for new records (after a commit that wrote
// some).
func (e *engine) changesCommitted() {
	e.mu.Lock()
	ch := e.feedWake
	e.feedWake = nil
	e.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// ChangesWake returns a channel that is closed once records newer than those a read made
// after this call sees are committed.
func (e *engine) ChangesWake() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.feedWake == nil {
		e.feedWake = make(chan struct{})
	}
	return e.feedWake
}

// Changes returns up to limit records after cursor after, oldest first, and the bounds of
// the feed as read. A cursor outside the bounds is ErrCursorExpired (with the bounds).
func (e *engine) Changes(ctx context.Context, after uint64, limit int) ([]Change, ChangeBounds, error) {
	if !e.feedOn() {
		return nil, ChangeBounds{}, ErrNoChangeFeed
	}
	if limit <= 0 {
		limit = 1
	}
	var out []Change
	var b ChangeBounds
	err := e.view(ctx, func(r reader) error {
		var err error
		if b, err = r.changeBounds(); err != nil {
			return err
		}
		if !b.Valid(after) {
			return ErrCursorExpired
		}
		out, err = r.changes(after, limit)
		return err
	})
	return out, b, err
}

// LatestChanges calls fn with the newest record of every namespace the feed knows, by
// namespace id, and returns the feed's bounds as of the same read: a reader that starts over
// takes these and follows the feed after Head.
func (e *engine) LatestChanges(ctx context.Context, fn func(Change) error) (ChangeBounds, error) {
	if !e.feedOn() {
		return ChangeBounds{}, ErrNoChangeFeed
	}
	var b ChangeBounds
	err := e.view(ctx, func(r reader) error {
		var err error
		if b, err = r.changeBounds(); err != nil {
			return err
		}
		return r.latestChanges(fn)
	})
	return b, err
}

// RecordChange writes one record in a transaction of its own and returns its cursor: for
// what no append carries — a restore's record (after the restoring write is durable). Its
// order with other records is the order of their transactions.
func (e *engine) RecordChange(ctx context.Context, c Change) (uint64, error) {
	if !e.feedOn() {
		return 0, ErrNoChangeFeed
	}
	if _, err := checkKey(c.Owner, c.NamespaceID); err != nil {
		return 0, err
	}
	if c.Kind < ChangeCreated || c.Kind > ChangeDeleted {
		return 0, fmt.Errorf("%w: change kind %d", ErrInvalid, c.Kind)
	}
	var cursor uint64
	err := e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error {
			c.At = e.opts.Clock.Now().Truncate(time.Millisecond)
			var err error
			if cursor, err = w.putChange(c); err != nil {
				return err
			}
			return e.pruneChanges(w)
		})
	})
	if err == nil {
		e.changesCommitted()
	}
	return cursor, err
}

// noteChanges writes the "updated" records of a batch of appends inside its transaction:
// one per namespace, in the order of each namespace's last append in the batch, with the
// state vector of that append (or of the latest append that had one; none when the last one
// still awaited its note, which only a cut forced after MaxNoteWait commits).
func (e *engine) noteChanges(w writer, batch []op, missing []bool) error {
	type last struct {
		key docKey
		sv  []byte
		at  int
	}
	var order []*last
	byKey := map[docKey]*last{}
	for i, o := range batch {
		if e.skip[i] || missing[i] {
			continue
		}
		l := byKey[o.r.key]
		if l == nil {
			l = &last{key: o.r.key}
			byKey[o.r.key] = l
			order = append(order, l)
		}
		l.at = i
		switch {
		case o.note != nil:
			l.sv = o.note
		case o.noteLater:
			// Only in a cut forced after MaxNoteWait: whatever an earlier append
			// said is older than this one.
			l.sv = nil
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].at < order[j].at }) // by each namespace's last append
	for _, l := range order {
		if err := e.writeChange(w, Change{Kind: ChangeUpdated, Owner: l.key.owner, NamespaceID: l.key.ns, StateVector: l.sv}); err != nil {
			return err
		}
	}
	return nil
}
