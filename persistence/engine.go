package persistence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// engine is the write pipeline both stores share. It owns
//   - the residency table: the in-memory state of loaded namespaces (append sequence numbers,
//     durable position, log size), dropped on Release;
//   - the commit queue: a bounded FIFO of appends and of synchronous control operations
//     (snapshot replacement, compaction results, archive/reset), written by one committer
//     goroutine in group-commit transactions;
//   - the compaction goroutine, which reads a log, folds it with the Compactor outside any
//     transaction, and hands the result to the committer as a control operation.
//
// Every write to document data goes through the committer, in queue order, so an archive or a
// snapshot replacement is ordered after the appends made before it. Entries and configuration
// are written in their own transactions by the calling goroutine.
//
// Its methods are filed by concern: catalog.go (Catalog), documents.go (Documents: the
// residency table and what callers queue), commit.go (the committer goroutine and the
// control operations it runs), compact.go (the compaction goroutine).
type engine struct {
	be       backend
	opts     Options
	readOnly bool
	healthy  atomic.Bool
	// lastNoSpace: the last failed write failed for lack of space (probe.go).
	lastNoSpace atomic.Bool

	kick          chan struct{} // cap 1: the queue became non-empty, or a batch filled up
	hurry         chan struct{} // cap 1: something began to wait for the queue to commit
	stop          chan struct{} // closed by Close: stop accepting work and drain
	abandon       chan struct{} // closed by Close when its context ends: give up the queue
	committerDone chan struct{}
	compactorDone chan struct{}
	compactCh     chan docKey // namespaces due for compaction; full → the trigger is dropped and fires again on a later commit

	mu        sync.Mutex // guards the fields below
	closed    bool
	res       map[docKey]*resident
	q         []op          // the commit queue, oldest first
	qAppends  int           // appends in q (control operations do not count against the bound)
	qBytes    int           // bytes of the appends in q
	waiting   int           // WaitFlushed calls blocked
	abandoned int           // appends Close gave up on
	feedWake  chan struct{} // closed when change-feed records are committed (ChangesWake)
	// taken is how many operations at the head of q the committer has taken into the batch
	// it writes: NoteStateVector leaves those alone (the committer reads them unlocked).
	taken int
	// heldForNote: the committer found no batch to cut at the head of q whose every
	// namespace has its state vector (AppendNoteLater), and waits for NoteStateVector.
	heldForNote bool

	// life is held for reading by every transaction started outside the committer, and for
	// writing by Close to close the backend after them.
	life      sync.RWMutex
	closeOnce sync.Once
	closeErr  error

	commits, committed, commitErrors, backpressure, compactions atomic.Uint64

	// Owned by the committer goroutine.
	lastErr error
	skip    []bool
	// heldSince is when the committer began to wait for a note (zero: not waiting);
	// forceCut makes the next cut ignore missing notes (after NoteWait); cutShort: the
	// last cut left appends of its run behind because their notes were owed.
	heldSince time.Time
	forceCut  bool
	cutShort  bool
}

type docKey struct{ owner, ns string }

// resident is the in-memory state of a loaded namespace. Guarded by engine.mu.
type resident struct {
	key      docKey
	assigned uint64 // last sequence number handed out by Append
	flushed  uint64 // last sequence number known durable
	pending  int    // appends in the queue
	err      error  // why queued appends of this namespace were abandoned
	wait     chan struct{}
	released bool // Release was called; drop once pending is 0
	gone     bool // archived or reset: no more appends

	logCount, logBytes int // durable log since the snapshot, for the compaction trigger
	snapBytes          int // size of the durable snapshot, for the compaction trigger
	compactQueued      bool
	compactFloor       int // after a failed compaction: wait until the log has this many updates

	cutOpen bool // scratch of nextLocked: its last append in the scanned prefix awaits a note
}

type opKind uint8

const (
	opAppend  opKind = iota
	opReplace        // ReplaceSnapshot
	opFold           // a compaction result
	opArchive        // Archive or Reset
	opConfig         // QueueConfig: a configuration value written with the appends
	opDelete         // Delete, DeleteEntry
)

// op is one element of the commit queue.
type op struct {
	kind opKind
	r    *resident // opAppend
	seq  uint64    // opAppend
	data []byte    // opAppend: the update; opConfig: the value (nil: remove the key)
	note []byte    // opAppend: the namespace's state vector after it, for the change feed (nil: none given)
	// noteLater (opAppend, AppendNoteLater): its state vector is given afterwards with
	// NoteStateVector, for it or a later append of the namespace; until then no group
	// commit ends the namespace's appends with it.
	noteLater bool
	ctl       *control     // opReplace, opFold, opArchive, opDelete and the other synchronous kinds
	cfg       *ConfigWrite // opConfig
}

// control is a synchronous operation; its caller waits on done.
type control struct {
	key     docKey
	data    []byte        // opReplace, opFold: the new snapshot
	through uint64        // opReplace, opFold: the snapshot holds appends ≤ through
	expect  uint64        // opFold: SnapshotThrough when the log was read
	reason  ArchiveReason // opArchive
	noted   bool          // opReplace: the snapshot saves changes no append holds (a change-feed record)
	sv      []byte        // opReplace with noted: the snapshot's state vector
	keep    bool          // opDelete: archive the document rather than drop it

	abandoned atomic.Bool // the caller stopped waiting before it ran

	done         chan struct{}
	err          error
	info         ArchiveInfo
	trimmed      int // log entries dropped
	trimmedBytes int
}

// errStale: a compaction result that no longer applies (the snapshot changed meanwhile).
var errStale = errors.New("persistence: snapshot changed during compaction")

func newEngine(be backend, opts Options) *engine {
	e := &engine{
		be:       be,
		opts:     opts,
		readOnly: opts.ReadOnly,
		kick:     make(chan struct{}, 1),
		hurry:    make(chan struct{}, 1),
		stop:     make(chan struct{}),
		abandon:  make(chan struct{}),
		res:      make(map[docKey]*resident),
	}
	e.healthy.Store(true)
	if !e.readOnly {
		e.committerDone = make(chan struct{})
		e.compactorDone = make(chan struct{})
		e.compactCh = make(chan docKey, 256)
		go e.commitLoop()
		go e.compactLoop()
	}
	return e
}

func checkName(what, s string) error {
	if s == "" || len(s) > MaxNameBytes || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s must be 1..%d bytes of UTF-8, got %q", ErrInvalid, what, MaxNameBytes, s)
	}
	return nil
}

func checkKey(owner, ns string) (docKey, error) {
	if err := checkName("owner", owner); err != nil {
		return docKey{}, err
	}
	if err := checkName("namespace id", ns); err != nil {
		return docKey{}, err
	}
	return docKey{owner, ns}, nil
}

// direct runs a transaction on the calling goroutine.
func (e *engine) direct(ctx context.Context, write bool, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if write && e.readOnly {
		return ErrReadOnly
	}
	e.life.RLock()
	defer e.life.RUnlock()
	if e.isClosed() {
		return ErrClosed
	}
	err := fn()
	if write && err != nil {
		e.writeFailed(err)
	}
	return err
}

func (e *engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

func (e *engine) view(ctx context.Context, fn func(r reader) error) error {
	return e.direct(ctx, false, func() error { return e.be.view(fn) })
}

// Close implements Store.Close.
func (e *engine) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		close(e.stop)
		var errs []error
		if !e.readOnly {
			select {
			case <-e.committerDone:
			case <-ctx.Done():
				close(e.abandon)
				<-e.committerDone
			}
			<-e.compactorDone
			e.mu.Lock()
			n := e.abandoned
			e.mu.Unlock()
			if n > 0 {
				cause := e.lastErr
				if cause == nil {
					cause = ctx.Err()
				}
				errs = append(errs, fmt.Errorf("persistence: close: %d queued appends were not committed: %w", n, cause))
			}
		}
		e.life.Lock()
		errs = append(errs, e.be.close())
		e.life.Unlock()
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}
