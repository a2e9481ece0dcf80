package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// Target is a namespace a peer replicates (§16, §19): the hub's namespace id and the local
// owner its replica belongs to here. The owner never goes on the wire; bootstrap and every
// later open use it.
type Target struct {
	NamespaceID string
	Owner       string
}

// TargetStatus is a target as the peer's admin API shows it.
type TargetStatus struct {
	Target
	// State is the §16 state: targeted, opening, bootstrapping, reconciling, live,
	// needs-resync, closing, closed, conflicted, failed or disconnected.
	State observer.ChannelState
	// Identity is the replication identity the hub announced at the last open (zero before).
	Identity registry.Identity
	// SchemaFailed: a replicated schema failed to re-arm (§23.1 schema-rearm-failed); the
	// namespace was closed and new connections leave it closed. Removing and adding the
	// target back clears it (the replica then refuses sessions while its schema is
	// invalid: registry.ErrSchemaInvalid); a reset recovers.
	SchemaFailed bool
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
	// configuration, §21).
	Targets []Target
	// Logger receives internal failures (never tokens, owners or bytes); nil discards them.
	Logger *slog.Logger
}

// TargetController is the peer's namespace layer (§16): it keeps the targets
// {namespaceId, localOwner} across connections, and for every ready connection its
// NewHandler (the peer's NamespaceFactory) runs one channel per target through the eleven
// states of §16 — targeted → opening → bootstrapping | reconciling → live ⇄ needs-resync,
// closing → closed, and conflicted, failed, disconnected.
//
// On a ready connection each target is opened: with a local replica, OPEN_NAMESPACE declares
// its identity and the namespace reconciles; without, the hub's snapshot is imported through
// the registry under the target's owner (§8.1), acknowledged, and a round follows to close
// the snapshot race. The peer starts every round (§9): after the bootstrap or the open, after
// a resync once its window is empty, and periodically (§9.4: one timer per live namespace,
// armed when a round ends). Local writes reach the hub through the replication session's
// fan-out; while the namespace is not live they wait in the bounded unsent queue, merged.
//
// Open, bootstrap and reconcile timeouts fail the namespace and, while the target is still
// wanted, rebuild the connection (§16, §18 namespace-recovery). Frames for namespaces that
// are not targets are answered with TARGET_NOT_REQUESTED. Removing a target closes its
// namespace (CLOSE_NAMESPACE) and releases its lease; adding it back on the same connection
// rebuilds the connection, as one connection allows one lifecycle per namespace (§1, §16).
// An identity conflict (a mismatch at open, IDENTITY_CHANGED) sticks to the target until
// Reset.
type TargetController struct {
	reg *registry.Registry
	log *slog.Logger
	wg  sync.WaitGroup // registry calls made off the connection goroutine

	mu      sync.Mutex
	targets map[protocol.NamespaceID]*target
	conn    *peerConn // the ready connection's namespace layer, if any
	closed  bool
}

// target is one replication target. Its fields are guarded by TargetController.mu; the
// channel serving it on a connection lives on that connection's goroutine.
type target struct {
	tc    *TargetController
	ns    protocol.NamespaceID
	owner string

	state      observer.ChannelState
	identity   registry.Identity
	conflicted bool // sticky: only Reset (or removing and adding) clears it (§16)
	// schemaFailed latches the first failed schema re-arm (ADR 0018 §3): one event, one
	// CLOSE_NAMESPACE, and no reopen by a new connection; removing and adding the target
	// back, or a reset, makes a new target without it.
	schemaFailed bool
	removed      bool
	cleaned      chan struct{}     // RemoveTarget: closed when the namespace is done with
	waits        []<-chan struct{} // what the last channel leaves settling (session, registry call)
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
	tc := &TargetController{reg: opts.Registry, log: log, targets: make(map[protocol.NamespaceID]*target)}
	for _, t := range opts.Targets {
		if err := tc.AddTarget(t); err != nil {
			return nil, err
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
// ErrTargetConflict (one connection carries one lifecycle per namespace id).
func (tc *TargetController) AddTarget(t Target) error {
	ns, err := checkTarget(t)
	if err != nil {
		return err
	}
	tc.mu.Lock()
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

// RemoveTarget removes a target (§16): its intent is marked removed at once; the namespace
// closes (CLOSE_NAMESPACE on a ready connection), its session stops, admitted applies settle
// and its lease is released — a socket close on the way joins the same cleanup. It returns
// when that is done, or when ctx ends (the cleanup goes on).
//
// The cleanup runs on the connection's goroutine, which also delivers observer events
// (§23.4: synchronously): an observer that removes a target must call RemoveTarget (or
// Reset) from a goroutine of its own, or it waits on itself until ctx ends.
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

// Reset archives the local replica of a target and bootstraps it again (GUIDE §8 reset; the
// way out of conflicted, §16): the target is removed, its replica reset in the registry,
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
	return TargetStatus{Target: Target{NamespaceID: tg.ns.String(), Owner: tg.owner}, State: tg.state,
		Identity: tg.identity, SchemaFailed: tg.schemaFailed}
}

// Close waits for the registry calls still running for the controller's connections. Call
// it after Peer.Close (which ends the connections and their channels) and before closing the
// registry (§21). Idempotent.
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

// NewHandler is the peer's NamespaceFactory: the namespace layer of one ready connection.
// It opens every wanted target that is neither conflicted nor closed by a failed schema
// re-arm.
func (tc *TargetController) NewHandler(s seam.Session) seam.Handler {
	pc := &peerConn{tc: tc, channels: make(map[protocol.NamespaceID]*peerChannel)}
	pc.nsConn = newNSConn(s, pc, tc.log, s.HubInstanceID())
	pc.degradedBypass = true
	refuseChunking(s, tc.log)
	tc.mu.Lock()
	tc.conn = pc
	tc.mu.Unlock()
	s.Post(pc.start)
	return pc
}

// peerConn is the peer's namespace layer on one connection.
type peerConn struct {
	nsConn
	tc           *TargetController
	channels     map[protocol.NamespaceID]*peerChannel // the targets taken up on this connection
	lastRound    uint32                                // syncRoundIds are per connection and never wrap (§9.1)
	reconnecting bool
	// OPEN pacing (GUIDE §6): at most maxConcurrentOpens channels are opening or
	// bootstrapping at once — the hub admits no more OPENs than that and holds only
	// maxEarlyFrames frames beyond, and the snapshots in flight stay within its control
	// reserve (maxQueuedControlBytes ≥ maxBootstrapBytes) — and the other targets wait, in
	// order, in targeted.
	opening  int
	openWait []*peerChannel
}

var _ seam.Handler = (*peerConn)(nil)

func (pc *peerConn) start() {
	if pc.closed || pc.draining() {
		return
	}
	pc.tc.mu.Lock()
	var open []*target
	for _, tg := range pc.tc.targets {
		if !tg.conflicted && !tg.schemaFailed {
			open = append(open, tg)
		}
	}
	pc.tc.mu.Unlock()
	slices.SortFunc(open, func(a, b *target) int { return strings.Compare(a.ns.String(), b.ns.String()) })
	for _, tg := range open {
		pc.targetAdded(tg)
	}
}

// targetAdded opens a target on this connection; a namespace that already had its
// lifecycle here needs a new connection (§16).
func (pc *peerConn) targetAdded(tg *target) {
	if pc.closed || !pc.tc.wanted(tg) {
		return
	}
	if old := pc.channels[tg.ns]; old != nil {
		if old.target == tg && !old.ended() {
			return
		}
		pc.reconnect()
		return
	}
	c := &peerChannel{pc: pc, target: tg}
	c.init(&pc.nsConn, tg.ns, observer.ChannelTargeted, c)
	pc.channels[tg.ns] = c
	pc.openWait = append(pc.openWait, c)
	pc.openNext()
}

// openNext opens waiting targets while the pacing allows.
func (pc *peerConn) openNext() {
	for len(pc.openWait) > 0 && pc.opening < pc.cfg.MaxConcurrentOpens && !pc.closed && !pc.draining() {
		c := pc.openWait[0]
		pc.openWait[0] = nil
		pc.openWait = pc.openWait[1:]
		if c.state == observer.ChannelTargeted && pc.tc.wanted(c.target) {
			pc.open(c)
		}
	}
}

// targetRemoved closes a removed target's namespace (§16).
func (pc *peerConn) targetRemoved(tg *target) {
	c := pc.channels[tg.ns]
	switch {
	case c == nil || c.target != tg || c.ended():
		pc.tc.cleanedUp(tg)
	case c.state == observer.ChannelTargeted:
		c.terminate(observer.ChannelClosed)
	case c.state == observer.ChannelOpening && c.openSent:
		c.closeAfterOpen = closeReasonRemove // CLOSE_NAMESPACE may follow only OPEN_OK
	case c.state == observer.ChannelOpening:
		c.terminate(observer.ChannelClosed) // nothing on the wire yet
	case c.closing():
		// The close under way (a drain) completes the removal.
	default:
		c.startClose(closeReasonRemove)
	}
}

func (pc *peerConn) reconnect() {
	if pc.reconnecting || pc.closed {
		return
	}
	pc.reconnecting = true
	pc.s.Reconnect()
}

// HandleFrame routes the frames only the peer receives, OPEN_OK, BOOTSTRAP_SNAPSHOT and
// IDENTITY_CHANGED, and hands the others to the shared routing.
func (pc *peerConn) HandleFrame(f protocol.Frame) {
	switch m := f.Message.(type) {
	case *protocol.OpenOK:
		if c := pc.requested(f, m.NamespaceID); c != nil {
			c.openOK(f, m)
		}
	case *protocol.BootstrapSnapshot:
		if c := pc.requested(f, m.NamespaceID); c != nil {
			c.snapshot(f, m)
		}
	case *protocol.IdentityChanged:
		if c := pc.requested(f, m.NamespaceID); c != nil {
			c.identityChanged()
		}
	default:
		pc.route(f)
	}
}

// requested returns the channel of a namespace this peer sent OPEN_NAMESPACE for, or
// answers TARGET_NOT_REQUESTED (§19).
func (pc *peerConn) requested(f protocol.Frame, ns protocol.NamespaceID) *peerChannel {
	c := pc.channels[ns]
	if c == nil || !c.openSent {
		pc.unknown(f.Type(), f.Sequence, ns)
		return nil
	}
	return c
}

func (pc *peerConn) HandleRejected(e *protocol.Error)                    { pc.rejected(e) }
func (pc *peerConn) HandleShed(ns protocol.NamespaceID, _ seam.ShedInfo) { pc.shed(ns) }
func (pc *peerConn) HandleRevoked(seam.Revocation)                       {}

// HandleDrain closes the open namespaces (§6.3); no new round or open starts.
func (pc *peerConn) HandleDrain(seam.Drain) { pc.drain() }

// HandleClosed: the socket is gone (§16): every channel's session stops, admitted applies
// settle and leases are released; the targets stay, projected as disconnected (failed and
// conflicted ones keep their state until the next connection or a reset, and one closed by
// a failed schema re-arm stays closed).
func (pc *peerConn) HandleClosed(seam.CloseInfo) {
	pc.connectionClosed(func(*channel) observer.ChannelState { return observer.ChannelDisconnected })
	pc.tc.mu.Lock()
	if pc.tc.conn == pc {
		pc.tc.conn = nil
	}
	for _, tg := range pc.tc.targets {
		switch {
		case tg.schemaFailed:
			tg.state = observer.ChannelClosed
		case tg.state == observer.ChannelFailed, tg.state == observer.ChannelConflicted:
		default:
			tg.state = observer.ChannelDisconnected
		}
	}
	pc.tc.mu.Unlock()
}

// ---- connRole --------------------------------------------------------------------------------

func (pc *peerConn) channel(ns protocol.NamespaceID) *channel {
	if c := pc.channels[ns]; c != nil {
		return &c.channel
	}
	return nil
}

// addressable: the hub may address a namespace once this peer sent OPEN_NAMESPACE for it;
// before, it was not requested on this connection (§19).
func (pc *peerConn) addressable(ns protocol.NamespaceID) *channel {
	if c := pc.channels[ns]; c != nil && c.openSent {
		return &c.channel
	}
	return nil
}

func (pc *peerConn) each(f func(*channel)) {
	for _, c := range pc.channels {
		f(&c.channel)
	}
}

// unknown answers a frame for a namespace this peer did not request (§19).
func (pc *peerConn) unknown(_ protocol.MessageType, seq uint32, ns protocol.NamespaceID) {
	if pc.sendError(ns, protocol.CodeTargetNotRequested, seq) {
		pc.emitNsError(ns, string(protocol.CodeTargetNotRequested), observer.DirectionSent)
	}
}

// ---- the peer's channel ------------------------------------------------------------------------

// peerChannel is a target taken up on one connection: the shared channel, and what only the
// peer keeps of it.
type peerChannel struct {
	channel
	pc             *peerConn
	target         *target
	declared       *registry.Identity // the local replica OPEN_NAMESPACE declared; nil: bootstrap
	openSent       bool
	closeAfterOpen string // a CLOSE reason to send as soon as OPEN_OK arrives
	gotSnapshot    bool
	snapSeq        uint32        // the BOOTSTRAP_SNAPSHOT sequence, acknowledged once imported
	opDone         chan struct{} // closed when the registry call off the connection goroutine is done
	periodic       seam.Timer    // the periodic reconciliation (§9.4)
}

// step1 takes the hub's half of the round this peer started (§9.1).
func (c *peerChannel) step1(f protocol.Frame, m *protocol.SyncStep1) {
	r := &c.round
	if !r.active || r.myStep1 == 0 || m.SyncRoundID != r.id || r.theirStep1 != 0 {
		c.violation(f) // the hub does not start rounds, and sends one Step1 per round
		return
	}
	r.theirStep1 = f.Sequence
	c.answerStep1(r.id, m.StateVector)
}

func (c *peerChannel) fenced(registry.Identity) {} // a peer's sessions are not fenced

// The peer receives OPEN_NAMESPACE from nobody: it owes no OPEN answer.
func (c *peerChannel) owesOpenAnswers() bool     { return false }
func (c *peerChannel) takeOpenAnswers() []uint32 { return nil }

// drainOpening: a channel waiting for OPEN_OK closes once it arrives; one whose OPEN was not
// sent yet ends when its local open returns.
func (c *peerChannel) drainOpening() {
	if c.openSent {
		c.closeAfterOpen = closeReasonDrain
	}
}

func (c *peerChannel) changed(from observer.ChannelState) {
	pc := c.pc
	pc.tc.publish(c.target, c.state, c.identity)
	if (from == observer.ChannelOpening || from == observer.ChannelBootstrapping) && c.state != observer.ChannelBootstrapping {
		// Opened (reconciling), failed, closed or disconnected: the next target may open.
		pc.opening--
		pc.openNext()
	}
}

// wentLive arms the periodic reconciliation (§9.4): one one-shot timer, armed after a round.
func (c *peerChannel) wentLive() {
	c.stopPeriodic()
	c.periodic = c.n.s.AfterFunc(c.n.cfg.ReconcileInterval, func() {
		c.periodic = nil
		if c.state == observer.ChannelLive {
			c.pc.startRound(c)
		}
	})
}

// resyncReady starts the round a resync asked for, once the window is empty (§9.4).
func (c *peerChannel) resyncReady() {
	if c.state == observer.ChannelNeedsResync && len(c.window) == 0 {
		c.pc.startRound(c)
	}
}

func (c *peerChannel) stopPeriodic() { stopTimer(&c.periodic) }

// conflicted sticks to the target until it is reset (§16).
func (c *peerChannel) conflicted() { c.target.setConflicted() }

func (c *peerChannel) released(settled <-chan struct{}) {
	tc := c.pc.tc
	tc.mu.Lock()
	tg := c.target
	tg.waits = []<-chan struct{}{settled}
	if c.opDone != nil {
		tg.waits = append(tg.waits, c.opDone)
	}
	removed := tg.removed
	tc.mu.Unlock()
	if removed {
		tc.cleanedUp(tg)
	}
}

// schemaRearmed reports a re-arm of the replicated schema (§23.1, ADR 0018): one
// schema-rearm-applied per install; on the first failure one schema-rearm-failed, and the
// namespace closes itself with CLOSE_NAMESPACE (closed, not reopened by a reconnect). The
// close is behaviour and happens without an observer too. No clock is read and no schema
// text leaves the registry.
func (c *peerChannel) schemaRearmed(r *registry.SchemaRearm) {
	em := c.n.em
	if s := r.Installed; s != nil {
		if em.Enabled() {
			ev := observer.SchemaRearmApplied{ConnectionID: c.n.connID(), NamespaceID: c.id,
				SemanticFingerprint: s.Fingerprint, UpdatedAt: observer.None[string]()}
			if s.HasUpdatedAt {
				ev.UpdatedAt = observer.SchemaUpdatedAt(s.UpdatedAt)
			}
			em.Emit(ev)
		}
		return
	}
	tg := c.target
	c.pc.tc.mu.Lock()
	first := !tg.schemaFailed
	tg.schemaFailed = true
	c.pc.tc.mu.Unlock()
	if !first {
		return // the latch: a later failed outcome adds no event and no close
	}
	if em.Enabled() {
		em.Emit(observer.SchemaRearmFailed{ConnectionID: c.n.connID(), NamespaceID: c.id,
			Code: observer.SchemaRearmCode(r.Failed)})
	}
	if !c.ended() && !c.closing() {
		c.startClose(closeReasonSchema)
	}
}

// ---- opening (§7) --------------------------------------------------------------------------

// open looks for the local replica of the target's owner and sends OPEN_NAMESPACE: with its
// identity (reconcile) or without (bootstrap).
func (pc *peerConn) open(c *peerChannel) {
	pc.opening++
	c.setState(observer.ChannelOpening)
	pc.armTimer(c, observer.FailedOpenTimeout, pc.cfg.OpenTimeout)
	owner, ns, ctx, reg := c.target.owner, c.id, pc.ctx, pc.tc.reg
	if !pc.leaseOff(c, func() (*registry.Lease, error) { return reg.Open(ctx, owner, ns) },
		func(lease *registry.Lease, err error) { pc.localOpened(c, lease, err) }) {
		c.failed(observer.FailedOpenFailed, 0)
	}
}

// leaseOff runs get (a registry open or import) off the connection goroutine and hands its
// outcome to then on it; a lease the connection can no longer take is released. c.opDone
// closes once that is done. It reports false, running nothing, after the controller closed.
func (pc *peerConn) leaseOff(c *peerChannel, get func() (*registry.Lease, error), then func(*registry.Lease, error)) bool {
	done := make(chan struct{})
	c.opDone = done
	ok := pc.tc.goOff(func() {
		lease, err := get()
		if !pc.s.Post(func() { then(lease, err); close(done) }) {
			if lease != nil {
				lease.Release()
			}
			close(done)
		}
	})
	if !ok {
		close(done)
	}
	return ok
}

func (pc *peerConn) localOpened(c *peerChannel, lease *registry.Lease, err error) {
	if c.state != observer.ChannelOpening || c.openSent || !pc.tc.wanted(c.target) || pc.draining() {
		if lease != nil {
			lease.Release()
		}
		if c.state == observer.ChannelOpening && !c.openSent {
			c.terminate(observer.ChannelClosed)
		}
		return
	}
	m := &protocol.OpenNamespace{NamespaceID: c.ns}
	switch {
	case errors.Is(err, registry.ErrNotFound):
		// No local replica: ask for a bootstrap.
	case err != nil:
		pc.tc.log.Warn("replication target open failed", slog.String("namespaceId", c.id), slog.String("error", err.Error()))
		c.failed(observer.FailedOpenFailed, 0)
		return
	default:
		id := lease.Identity()
		c.lease, c.declared = lease, &id
		m.HasLocalReplica, m.ReplicationID, m.ReplicationEpoch = true, id.ReplicationID, id.Epoch
	}
	if _, err := pc.s.Send(m); err != nil {
		c.sendFailed(err)
		return
	}
	c.openSent = true
}

// openOK: the hub accepted the open (§7.2); its mode must match what we declared.
func (c *peerChannel) openOK(f protocol.Frame, m *protocol.OpenOK) {
	pc := c.pc
	if c.ended() {
		return
	}
	consistent := m.Mode == protocol.ModeBootstrap
	if d := c.declared; d != nil {
		consistent = m.Mode == protocol.ModeReconcile && m.ReplicationID == d.ReplicationID && m.ReplicationEpoch == d.Epoch
	}
	// A second OPEN_OK finds the channel past opening: OPEN_OK leaves it at once (when the
	// CLOSE_NAMESPACE it may owe cannot be sent, the connection is closing and delivers no
	// more frames).
	if c.state != observer.ChannelOpening || !consistent {
		c.violation(f)
		return
	}
	c.identity = registry.Identity{ReplicationID: m.ReplicationID, Epoch: m.ReplicationEpoch}
	stopTimer(&c.timer)
	if c.closeAfterOpen != "" {
		c.startClose(c.closeAfterOpen)
		return
	}
	if m.Mode == protocol.ModeBootstrap {
		c.setState(observer.ChannelBootstrapping)
		pc.armTimer(c, observer.FailedBootstrapTimeout, pc.cfg.BootstrapTimeout)
		return
	}
	c.setState(observer.ChannelReconciling)
	pc.armReconcileTimer(c)
	pc.openSession(c, func() { pc.startRound(c) })
}

// openSession opens the channel's replication session on its lease, then runs then.
func (pc *peerConn) openSession(c *peerChannel, then func()) {
	opts := c.sessionOptions()
	opts.Expect = &c.identity
	post := pc.s.Post
	err := c.lease.OpenSessionAsync(opts, func(sess *registry.Session, _ registry.SessionStart, err error) {
		if !post(func() { pc.sessionOpened(c, sess, err, then) }) && sess != nil {
			sess.Close()
		}
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedSessionOpenFailed)
	}
}

func (pc *peerConn) sessionOpened(c *peerChannel, sess *registry.Session, err error, then func()) {
	if c.ended() || c.closing() {
		if sess != nil {
			sess.Close()
		}
		return
	}
	if err != nil {
		c.sendError(openErrorCode(err), 0, observer.FailedSessionOpenFailed)
		return
	}
	c.attach(sess)
	then()
}

// ---- bootstrap (§8) ------------------------------------------------------------------------

// snapshot imports the hub's snapshot as the target's replica (§8.1): exclusively, under the
// target's owner, with the OPEN_OK identity.
func (c *peerChannel) snapshot(f protocol.Frame, m *protocol.BootstrapSnapshot) {
	pc := c.pc
	if !c.accepts(f) {
		return
	}
	if c.state != observer.ChannelBootstrapping || c.gotSnapshot {
		c.violation(f)
		return
	}
	c.gotSnapshot = true
	switch {
	case m.ReplicationID != c.identity.ReplicationID:
		c.sendError(protocol.CodeReplicationIDMismatch, f.Sequence, observer.FailedProtocolViolation)
		return
	case m.ReplicationEpoch != c.identity.Epoch:
		c.sendError(protocol.CodeReplicationEpochMismatch, f.Sequence, observer.FailedProtocolViolation)
		return
	}
	c.snapSeq = f.Sequence
	owner, ns, want, snap, ctx, reg := c.target.owner, c.id, c.identity, m.Snapshot, pc.ctx, pc.tc.reg
	pc.leaseOff(c, func() (*registry.Lease, error) { return reg.Import(ctx, owner, ns, want, snap) },
		func(lease *registry.Lease, err error) { pc.imported(c, lease, err, len(snap)) })
}

func (pc *peerConn) imported(c *peerChannel, lease *registry.Lease, err error, n int) {
	if c.state != observer.ChannelBootstrapping {
		if lease != nil {
			lease.Release()
		}
		return
	}
	if err != nil {
		// §8.1: a replica that appeared meanwhile is not overwritten nor merged
		// (BOOTSTRAP_FAILED).
		c.sendError(openErrorCode(err), c.snapSeq, observer.FailedApplyRejected)
		return
	}
	c.lease = lease
	if pc.em.Enabled() {
		pc.em.Emit(observer.BootstrapImported{ConnectionID: pc.connID(), NamespaceID: c.id, Bytes: n})
	}
	pc.openSession(c, func() {
		// §8.2: the ACK says the import and the session are in place; a round follows to
		// close the race between the snapshot's encoding and its installation.
		if _, err := pc.s.Send(&protocol.BootstrapAck{NamespaceID: c.ns, AckedSequence: c.snapSeq}); err != nil {
			return
		}
		c.setState(observer.ChannelReconciling)
		pc.armReconcileTimer(c)
		pc.startRound(c)
	})
}

// identityChanged: the hub bumped the epoch (§11). The replica stays as it is; the target
// is conflicted until reset.
func (c *peerChannel) identityChanged() {
	pc := c.pc
	if !c.terminate(observer.ChannelConflicted) {
		return
	}
	pc.emitNsError(c.ns, string(observer.NsErrIdentityChanged), observer.DirectionReceived)
	c.emitConflicted(observer.ViaIdentityChangedFrame)
	c.target.setConflicted()
}

// ---- rounds (§9) ---------------------------------------------------------------------------

func (pc *peerConn) armReconcileTimer(c *peerChannel) {
	pc.armTimer(c, observer.FailedReconcileTimeout, pc.cfg.ReconcileTimeout)
}

// armTimer (re)arms the channel's timer for its current state (§18): if the channel is still
// in that state after d, it times out with cause.
func (pc *peerConn) armTimer(c *peerChannel, cause observer.FailedCause, d time.Duration) {
	stopTimer(&c.timer)
	state := c.state
	c.timer = pc.s.AfterFunc(d, func() {
		c.timer = nil
		if c.state == state {
			pc.timedOut(c, cause, d)
		}
	})
}

// startRound opens a round with this peer's Step1 (§9.1). Not during a drain (§6.3).
func (pc *peerConn) startRound(c *peerChannel) {
	if pc.draining() || c.sess == nil || c.ended() || c.closing() || c.round.active {
		return
	}
	c.stopPeriodic()
	c.beginRound(0)
	pc.armReconcileTimer(c)
	post := pc.s.Post
	err := c.sess.StateVectorAsync(func(sv []byte, err error) {
		post(func() { pc.step1Ready(c, sv, err) })
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
	}
}

func (pc *peerConn) step1Ready(c *peerChannel, sv []byte, err error) {
	if c.ended() || c.closing() || !c.round.active || c.round.myStep1 != 0 {
		return
	}
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
		return
	}
	if pc.lastRound == math.MaxUint32 {
		// syncRoundId never wraps on a connection (§9.1): a new connection starts over.
		pc.reconnect()
		return
	}
	pc.lastRound++
	c.round.id = pc.lastRound
	c.sendStep1(sv)
}

// timedOut fails a namespace whose open, bootstrap or reconcile timer fired, and rebuilds
// the connection while the target is still wanted (§16, §18, issue #254).
func (pc *peerConn) timedOut(c *peerChannel, cause observer.FailedCause, d time.Duration) {
	c.failed(cause, d)
	if pc.tc.wanted(c.target) {
		pc.reconnect()
	}
}
