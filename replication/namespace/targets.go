package namespace

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Target is a namespace a peer replicates: the hub's namespace id and the local owner its
// replica belongs to here. The owner never goes on the wire; bootstrap and every
// later open use it.
type Target struct {
	NamespaceID string
	Owner       string
}

// TargetStatus is a target as the peer's admin API shows it.
type TargetStatus struct {
	Target
	// State is the namespace's state on the peer: targeted, opening, bootstrapping,
	// reconciling, live, needs-resync, closing, closed, conflicted, failed or disconnected.
	State observer.ChannelState
	// Identity is the replication identity the hub announced at the last open (zero before).
	Identity registry.Identity
	// SchemaFailed: a replicated schema failed to re-arm (schema-rearm-failed); the
	// namespace was closed and new connections leave it closed. Removing and adding the
	// target back clears it (the replica then refuses sessions while its schema is
	// invalid: registry.ErrSchemaInvalid); a reset recovers.
	SchemaFailed bool
	// Progress is the snapshot, catch-up difference or live update being received from the
	// hub in chunks, while one is (nil otherwise).
	Progress *TransferProgress
	// Failure is why the namespace last failed and when it is tried again, until it is live
	// again (nil when it has not failed since).
	Failure *TargetFailure
	// UnreplicatedBytes counts the bytes of local writes (admin API, editors) this peer
	// took since it started and the hub has not confirmed yet.
	UnreplicatedBytes int64
}

// Target controller errors.
var (
	ErrUnknownTarget  = errors.New("namespace: no such replication target")
	ErrTargetConflict = errors.New("namespace: the namespace is already a target with another owner")
)

// TargetControllerOptions configure a TargetController.
type TargetControllerOptions struct {
	// Registry holds the peer's replicas (registry.RolePeer). Required.
	Registry *registry.Registry
	// Targets are the targets to replicate from the start (the host restores them from its
	// configuration at start-up).
	Targets []Target
	// Logger receives internal failures (never tokens, owners or bytes); nil discards them.
	Logger *slog.Logger
	// Rand draws the jitter of the retries of failed targets; nil: a generator seeded from
	// crypto/rand. Tests inject their own.
	Rand Rand
	// Ledger, when set, keeps each target's count of local write bytes the hub has not
	// confirmed across restarts (localwrites.go). Unreplicated are the counts it kept, by
	// namespace id: a target of Targets starts with its count written and none of it
	// confirmed, until the first round with the hub confirms it.
	Ledger       LocalWriteLedger
	Unreplicated map[string]int64
	// Presence, when set, relays this implementation's presence extension on the
	// connections that negotiated it (see PresenceRelay).
	Presence PresenceRelay
	// OnHubDeleted, when set, is told once the peer has acted on the hub's NAMESPACE_DELETED
	// for a target (hubdeleted.go): the target removed, the replica deleted — kept in an
	// archive when archive.ID is not 0 —, or err. It runs on a goroutine of its own.
	OnHubDeleted func(t Target, archive persistence.ArchiveInfo, err error)
}

// Rand is a source of random numbers: Int64N returns one in [0, n).
type Rand interface{ Int64N(n int64) int64 }

// TargetController is the peer's namespace layer (docs/protocol.md#peer-namespace-states):
// it keeps the targets (namespace id and local owner) across connections, and for every
// ready connection its NewHandler (the peer's seam.NamespaceFactory) runs one channel per
// target through the peer's eleven namespace states — targeted → opening → bootstrapping |
// reconciling → live ⇄ needs-resync, closing → closed, and conflicted, failed, disconnected.
//
// On a ready connection each target is opened: with a local replica, OPEN_NAMESPACE declares
// its identity and the namespace reconciles; without, the hub's snapshot is imported through
// the registry under the target's owner, acknowledged, and a round follows to close the
// race between the snapshot and the updates made meanwhile. The peer starts every round:
// after the bootstrap or the open, after a resync once its window is empty, and
// periodically (one timer per live namespace, armed when a round ends). Local writes reach
// the hub through the replication session's fan-out; while the namespace is not live they
// wait in the bounded unsent queue, merged.
//
// Open, bootstrap and reconcile timeouts fail the namespace and, while the target is still
// wanted, rebuild the connection (namespace recovery). Frames for namespaces that are not
// targets are answered with TARGET_NOT_REQUESTED. Removing a target closes its namespace
// (CLOSE_NAMESPACE) and releases its lease; adding it back on the same connection rebuilds
// the connection, as one connection allows one lifecycle per namespace. An identity
// conflict (a mismatch at open, IDENTITY_CHANGED) sticks to the target until Reset.
//
// Its methods may be called from any goroutine; a connection's channels live on that
// connection's owner goroutine.
type TargetController struct {
	reg      *registry.Registry
	log      *slog.Logger
	presence PresenceRelay  // TargetControllerOptions.Presence
	wg       sync.WaitGroup // registry calls made off the connection goroutine

	mu      sync.Mutex // guards targets, hubDeleting, conn, closed, rand, the live cap and the fields of every target
	targets map[protocol.NamespaceID]*target
	// hubDeleting holds the namespaces the hub said were deleted while their target is being
	// removed and their replica deleted (hubdeleted.go): until the tombstone is written,
	// adding one of them as a target again is refused as deleted.
	hubDeleting map[protocol.NamespaceID]struct{}
	conn        *peerConn // the ready connection's namespace layer, if any
	closed      bool
	rand        Rand
	// liveCap is the largest live update the last ready connection could carry (0 before
	// the first): maxChunkedUpdateBytes when it negotiated chunked transfers, else
	// maxUpdateBytes. Local writes above it are refused.
	liveCap     int
	liveChunked bool
	ledger      LocalWriteLedger // TargetControllerOptions.Ledger; nil: the counts live in memory only

	onHubDeleted func(t Target, archive persistence.ArchiveInfo, err error) // set once

	assemblies assemblyCounter // chunked transfers being received from the hub
}

// target is one replication target. Its fields are guarded by TargetController.mu; the
// channel serving it on a connection lives on that connection's goroutine.
type target struct {
	tc    *TargetController
	ns    protocol.NamespaceID
	owner string

	state      observer.ChannelState
	identity   registry.Identity
	conflicted bool // sticky: only Reset (or removing and adding) clears it
	// schemaFailed latches the first failed schema re-arm: one event, one
	// CLOSE_NAMESPACE, and no reopen by a new connection; removing and adding the target
	// back, or a reset, makes a new target without it.
	schemaFailed bool
	progress     *TransferProgress // an inbound chunked transfer in progress
	// failure is the last failure until the target is live again; failGen counts failures,
	// so that a retry scheduled for an earlier one does nothing (recovery.go).
	failure *TargetFailure
	failGen uint64
	// The ledger of local writes (localwrites.go): bytes counted (atomic: the count is read
	// on connection goroutines without the lock) and bytes the hub confirmed.
	written   atomic.Int64
	confirmed int64
	idleCheck atomic.Bool // a look at the idle channel is posted
	removed   bool
	// wasLive: the target was live on a connection of this process, so its ledger of local
	// writes is complete (it starts at zero at start-up, not knowing older writes).
	wasLive bool
	cleaned chan struct{}     // RemoveTarget: closed when the namespace is done with
	waits   []<-chan struct{} // what the last channel leaves settling (session, registry call)
}

// NewTargetController returns the peer's namespace layer over a peer registry. Pass its
// NewHandler as PeerOptions.Namespaces. Close it after the Peer.
func NewTargetController(opts TargetControllerOptions) (*TargetController, error) {
	if opts.Registry == nil || opts.Registry.Role() != registry.RolePeer {
		return nil, errors.New("namespace: NewTargetController needs a peer registry")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rnd := opts.Rand
	if rnd == nil {
		var seed [32]byte
		_, _ = crand.Read(seed[:])
		rnd = mrand.New(mrand.NewChaCha8(seed))
	}
	tc := &TargetController{reg: opts.Registry, log: log, targets: make(map[protocol.NamespaceID]*target), hubDeleting: make(map[protocol.NamespaceID]struct{}), rand: rnd, ledger: opts.Ledger,
		presence: opts.Presence, onHubDeleted: opts.OnHubDeleted}
	for _, t := range opts.Targets {
		if err := tc.AddTarget(t); err != nil {
			return nil, err
		}
		if n := opts.Unreplicated[t.NamespaceID]; n > 0 {
			ns, _ := protocol.ParseNamespaceID(t.NamespaceID)
			tc.targets[ns].written.Store(n)
		}
	}
	return tc, nil
}

func checkTarget(t Target) (protocol.NamespaceID, error) {
	ns, err := protocol.ParseNamespaceID(t.NamespaceID)
	if err != nil {
		return ns, fmt.Errorf("namespace: target: %w", err)
	}
	if t.Owner == "" {
		return ns, errors.New("namespace: target needs a local owner")
	}
	return ns, nil
}

// AddTarget adds a replication target; on a ready connection its namespace opens at once.
// Adding a target that exists with the same owner does nothing; with another owner it is
// ErrTargetConflict (one connection carries one lifecycle per namespace id). A namespace
// the hub deleted, whose replica is still being deleted, is registry.ErrDeleted.
func (tc *TargetController) AddTarget(t Target) error {
	ns, err := checkTarget(t)
	if err != nil {
		return err
	}
	tc.mu.Lock()
	if _, ok := tc.hubDeleting[ns]; ok {
		tc.mu.Unlock()
		return registry.ErrDeleted
	}
	if old := tc.targets[ns]; old != nil {
		tc.mu.Unlock()
		if old.owner != t.Owner {
			return ErrTargetConflict
		}
		return nil
	}
	tg := &target{tc: tc, ns: ns, owner: t.Owner, state: observer.ChannelTargeted}
	tc.targets[ns] = tg
	pc := tc.conn
	tc.mu.Unlock()
	if pc != nil {
		pc.s.Post(func() { pc.targetAdded(tg) })
	}
	return nil
}

// RemoveTarget removes a target: its intent is marked removed at once; the namespace
// closes (CLOSE_NAMESPACE on a ready connection), its session stops, admitted applies settle
// and its lease is released — a socket close on the way joins the same cleanup. It returns
// when that is done, or when ctx ends (the cleanup goes on).
//
// The cleanup runs on the connection's goroutine, which also delivers observer events,
// synchronously: an observer that removes a target must call RemoveTarget (or Reset) from a
// goroutine of its own, or it waits on itself until ctx ends.
func (tc *TargetController) RemoveTarget(ctx context.Context, namespaceID string) error {
	ns, err := protocol.ParseNamespaceID(namespaceID)
	if err != nil {
		return ErrUnknownTarget
	}
	tc.mu.Lock()
	tg := tc.targets[ns]
	if tg == nil {
		tc.mu.Unlock()
		return ErrUnknownTarget
	}
	delete(tc.targets, ns)
	tg.removed = true
	tg.cleaned = make(chan struct{})
	tc.recordLocked(tg.ns.String(), 0) // its writes stay in the replica, never to replicate as a target's
	pc := tc.conn
	tc.mu.Unlock()
	if pc == nil || !pc.s.Post(func() { pc.targetRemoved(tg) }) {
		tc.cleanedUp(tg)
	}
	select {
	case <-tg.cleaned:
	case <-ctx.Done():
		return ctx.Err()
	}
	tc.mu.Lock()
	waits := tg.waits
	tc.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Reset archives the local replica of a target and bootstraps it again (the admin API's
// reset; the way out of conflicted): the target is removed, its replica reset in the registry,
// and the target added back, which reopens it — on a new connection if the namespace
// already had its lifecycle on the current one. Like RemoveTarget, not from an observer's
// own call.
func (tc *TargetController) Reset(ctx context.Context, namespaceID string) error {
	ns, err := protocol.ParseNamespaceID(namespaceID)
	if err != nil {
		return ErrUnknownTarget
	}
	tc.mu.Lock()
	tg := tc.targets[ns]
	tc.mu.Unlock()
	if tg == nil {
		return ErrUnknownTarget
	}
	t := Target{NamespaceID: namespaceID, Owner: tg.owner}
	if err := tc.RemoveTarget(ctx, namespaceID); err != nil {
		// Put the target back. It was removed a moment ago, so adding it cannot conflict;
		// the removal's error is the one to report.
		_ = tc.AddTarget(t)
		return err
	}
	_, err = tc.reg.Reset(ctx, t.Owner, namespaceID)
	addErr := tc.AddTarget(t)
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		return err
	}
	return addErr
}

// Targets lists the targets and their states, by namespace id.
func (tc *TargetController) Targets() []TargetStatus {
	tc.mu.Lock()
	out := make([]TargetStatus, 0, len(tc.targets))
	for _, tg := range tc.targets {
		out = append(out, tg.status())
	}
	tc.mu.Unlock()
	slices.SortFunc(out, func(a, b TargetStatus) int { return strings.Compare(a.NamespaceID, b.NamespaceID) })
	return out
}

// Target returns one target's status.
func (tc *TargetController) Target(namespaceID string) (TargetStatus, bool) {
	ns, err := protocol.ParseNamespaceID(namespaceID)
	if err != nil {
		return TargetStatus{}, false
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tg := tc.targets[ns]
	if tg == nil {
		return TargetStatus{}, false
	}
	return tg.status(), true
}

func (tg *target) status() TargetStatus {
	st := TargetStatus{Target: Target{NamespaceID: tg.ns.String(), Owner: tg.owner}, State: tg.state,
		Identity: tg.identity, SchemaFailed: tg.schemaFailed, UnreplicatedBytes: max(tg.pendingLocked(), 0)}
	if tg.progress != nil {
		p := *tg.progress
		st.Progress = &p
	}
	if tg.failure != nil {
		f := *tg.failure
		st.Failure = &f
	}
	return st
}

// rnd draws the jitter of a retry; tc.mu held.
func (tc *TargetController) rnd(n int64) int64 { return tc.rand.Int64N(n) }

// Assemblies returns the number of chunked transfers being received from the hub now: each
// holds a buffer of its declared size until it completes or is discarded.
func (tc *TargetController) Assemblies() int64 { return tc.assemblies.Load() }

// Close waits for the registry calls still running for the controller's connections. Call
// it after Peer.Close (which ends the connections and their channels) and before closing the
// registry. Idempotent.
func (tc *TargetController) Close() {
	tc.mu.Lock()
	tc.closed = true
	tc.mu.Unlock()
	tc.wg.Wait()
}

// goOff runs f off the connection goroutine, counted for Close; false after Close.
func (tc *TargetController) goOff(f func()) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.closed {
		return false
	}
	tc.wg.Add(1)
	go func() {
		defer tc.wg.Done()
		f()
	}()
	return true
}

// wanted reports whether a target is still to be replicated.
func (tc *TargetController) wanted(tg *target) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return !tg.removed
}

func (tc *TargetController) publish(tg *target, state observer.ChannelState, id registry.Identity) {
	tc.mu.Lock()
	tg.state = state
	if id.Valid() {
		tg.identity = id
	}
	if state == observer.ChannelLive {
		tg.failure = nil // recovered: the next failure starts its backoff afresh
		tg.wasLive = true
	}
	tc.mu.Unlock()
}

// setProgress publishes a target's inbound transfer in progress (nil: none).
func (tc *TargetController) setProgress(tg *target, p *TransferProgress) {
	tc.mu.Lock()
	tg.progress = p
	tc.mu.Unlock()
}

func (tg *target) setConflicted() {
	tg.tc.mu.Lock()
	tg.conflicted = true
	tg.tc.mu.Unlock()
}

// cleanedUp completes a removal (once).
func (tc *TargetController) cleanedUp(tg *target) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	select {
	case <-tg.cleaned:
	default:
		close(tg.cleaned)
	}
}
