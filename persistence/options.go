package persistence

import (
	"fmt"
	"time"

	"github.com/nomicore/nomicore/clock"
)

// Defaults of Options.
const (
	DefaultCommitDelay = 2 * time.Millisecond
	// DefaultUnawaitedCommitDelay: chosen with the relay benchmark's fan-out, where the
	// commits (their two fsyncs, and the runtime's reaction to a thread blocked in them) were
	// an eighth of the hub's CPU at 2 ms and still 13 % at 8 ms; 50 ms saved no more.
	DefaultUnawaitedCommitDelay = 20 * time.Millisecond
	DefaultMaxBatch             = 1024
	DefaultMaxQueuedAppends     = 65536
	DefaultMaxQueuedBytes       = 64 << 20
	DefaultRetryMin             = 50 * time.Millisecond
	DefaultRetryMax             = 2 * time.Second
	DefaultCompactAfterCount    = 1000
	DefaultCompactAfterBytes    = 1 << 20
	// DefaultCompactSnapshotRatio: compaction also waits until the log holds at least a
	// quarter of the snapshot's bytes.
	DefaultCompactSnapshotRatio = 4
	DefaultLockTimeout          = time.Second
)

// Options configure a store. The zero value gives the defaults above (and no compaction,
// since there is no Compactor).
type Options struct {
	// Compactor folds a log into its snapshot. Nil disables compaction.
	Compactor Compactor
	// CompactAfterCount and CompactAfterBytes start a background compaction of a resident
	// namespace whose durable log holds at least that many updates or bytes. Zero means the
	// default; negative disables that trigger.
	CompactAfterCount int
	CompactAfterBytes int
	// CompactSnapshotRatio N also holds a compaction back until the log holds at least 1/N of
	// the snapshot's bytes: a compaction rewrites the whole snapshot, so this bounds the bytes
	// written per logged byte whatever the document's size. Zero means the default; negative
	// disables the condition.
	CompactSnapshotRatio int

	// CommitDelay bounds how long the first append of an idle queue waits for others to join
	// its transaction while something waits for the queue to commit (WaitFlushed, or an
	// operation queued behind the appends). Zero means the default; negative commits at once
	// (and UnawaitedCommitDelay, unless set, is then zero too).
	CommitDelay time.Duration
	// UnawaitedCommitDelay is that bound while nothing waits: the appends were acknowledged
	// already (a replication acknowledgement means applied, not durable), so waiting longer
	// only widens the window a crash could lose from this copy — which the replicas that
	// sent the updates still hold and send again — and groups more appends per transaction
	// and fsync. Something starting to wait cuts the wait to CommitDelay from its start.
	// Zero means the default; a value below CommitDelay is CommitDelay.
	UnawaitedCommitDelay time.Duration
	// MaxBatch is the most appends one transaction carries; a full batch commits at once.
	MaxBatch int
	// MaxQueuedAppends and MaxQueuedBytes bound the commit queue; past them Append returns
	// ErrBackpressure (a single append larger than MaxQueuedBytes is accepted into an empty
	// queue).
	MaxQueuedAppends int
	MaxQueuedBytes   int
	// RetryMin and RetryMax bound the exponential backoff between attempts to commit after a
	// failed commit. Appends stay queued meanwhile.
	RetryMin time.Duration
	RetryMax time.Duration

	// Clock drives the commit delay and the retry backoff; nil means clock.Real().
	Clock clock.Clock

	// The On… callbacks run on the store's goroutines; a panic in one is recovered and
	// ignored.
	//
	// OnFlushed is called after each commit, for each namespace it advanced, with the highest
	// durable append sequence number (just after Flushed and WaitFlushed see it). It runs on
	// the committer goroutine and must not block.
	OnFlushed func(owner, namespaceID string, through uint64)
	// OnHealthChange is called when a commit fails after a success (healthy=false, with the
	// error) and when a commit succeeds after a failure (true, nil). Same rules as OnFlushed.
	OnHealthChange func(healthy bool, err error)
	// OnCompacted is called after a log was folded into the snapshot, through the given
	// append. It runs on the committer goroutine and must not block.
	OnCompacted func(owner, namespaceID string, through uint64)
	// OnCompactionError is called when a compaction fails (the Compactor's error, or a read
	// error). It runs on the compaction goroutine and must not block.
	OnCompactionError func(owner, namespaceID string, err error)

	// CommitHook, when set, is called inside every write transaction of the committer after
	// its records are written and before it commits; an error aborts the transaction as a
	// failing disk would. It exists to test write failures.
	CommitHook func() error

	// ChangeFeed, when set, makes the store keep a change feed (see Change): a record in the
	// transaction of every creation and every group commit of updates, read with Changes.
	ChangeFeed *ChangeFeedOptions

	// LockTimeout bounds the wait for the file lock of a BoltStore; zero means the default.
	LockTimeout time.Duration
	// ReadOnly opens a BoltStore for reading only (a shared lock; every write returns
	// ErrReadOnly). Used by nmcr store.
	ReadOnly bool
}

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.CommitDelay == 0:
		o.CommitDelay = DefaultCommitDelay
	case o.CommitDelay < 0:
		o.CommitDelay = 0
	}
	switch {
	case o.UnawaitedCommitDelay == 0 && o.CommitDelay == 0: // at once stays at once
	case o.UnawaitedCommitDelay == 0:
		o.UnawaitedCommitDelay = max(DefaultUnawaitedCommitDelay, o.CommitDelay)
	case o.UnawaitedCommitDelay < o.CommitDelay:
		o.UnawaitedCommitDelay = o.CommitDelay
	}
	fill := func(v *int, def int) { // zero → default
		if *v == 0 {
			*v = def
		}
	}
	fill(&o.MaxBatch, DefaultMaxBatch)
	fill(&o.MaxQueuedAppends, DefaultMaxQueuedAppends)
	fill(&o.MaxQueuedBytes, DefaultMaxQueuedBytes)
	fill(&o.CompactAfterCount, DefaultCompactAfterCount)
	fill(&o.CompactAfterBytes, DefaultCompactAfterBytes)
	fill(&o.CompactSnapshotRatio, DefaultCompactSnapshotRatio)
	if o.RetryMin == 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax == 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	switch {
	case o.MaxBatch < 0, o.MaxQueuedAppends < 0, o.MaxQueuedBytes < 0:
		return o, fmt.Errorf("%w: MaxBatch, MaxQueuedAppends and MaxQueuedBytes must be positive", ErrInvalid)
	case o.RetryMin < 0 || o.RetryMax < o.RetryMin:
		return o, fmt.Errorf("%w: need 0 < RetryMin <= RetryMax", ErrInvalid)
	case o.LockTimeout < 0:
		return o, fmt.Errorf("%w: LockTimeout must be positive", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	return o, nil
}
