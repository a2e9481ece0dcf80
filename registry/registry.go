package registry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// Role is the side the registry serves.
type Role uint8

// Roles.
const (
	RoleHub  Role = 1 // creates namespaces, owns identity and schema, checks peer updates
	RolePeer Role = 2 // holds replicas bootstrapped from a hub, trusts its hub session
)

func (r Role) String() string {
	switch r {
	case RoleHub:
		return "hub"
	case RolePeer:
		return "peer"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Defaults of Config.
const (
	DefaultMaxQueuedSlots        = 4096
	DefaultSnapshotOnUnloadAfter = 256
	DefaultSaveRetryMin          = 100 * time.Millisecond
	DefaultSaveRetryMax          = 5 * time.Second
	// MaxCreateRetries is how often Create draws a new id after a collision.
	MaxCreateRetries = 8
)

// Config configures a Registry.
type Config struct {
	// Role is RoleHub or RolePeer.
	Role Role
	// Catalog keeps the namespace entries; its health is the health Lease.Degraded reports.
	// The registry does not close it: its owner closes it after the registry has shut down.
	Catalog persistence.Catalog
	// Documents keeps the documents of a single hub or a peer, in this process (usually the
	// store that is the Catalog too: a persistence.Store is both). Set exactly one of
	// Documents and Shared. The registry does not close it.
	Documents persistence.Documents
	// Clock gives entry creation times and paces the saver's retries; nil means clock.Real().
	Clock clock.Clock
	// Random is the source of namespace ids, replication ids and Yjs client ids; nil means
	// crypto/rand. It is used under a lock.
	Random io.Reader
	// StageClock, when set, times the stages of every apply slot (ApplyResult.Stages).
	// Without it the sequencer reads no clock. A clock.Clock will do; pass the same one the
	// replication layer's observer seam uses, so the stage durations and its latencies are
	// comparable.
	StageClock clock.Reader
	// MaxQueuedSlots bounds each namespace's slot queue; past it operations are refused at
	// once with ErrOverloaded. Zero means the default.
	MaxQueuedSlots int
	// SnapshotOnUnloadAfter: when a namespace unloads after at least this many appends
	// since it was loaded (or last snapshotted), the registry writes a snapshot of the live
	// document. Zero means the default; negative never.
	SnapshotOnUnloadAfter int
	// SaveRetryMin and SaveRetryMax bound the backoff of the saver (a namespace whose change
	// the store refused keeps trying to save a snapshot). Zero means the defaults.
	SaveRetryMin, SaveRetryMax time.Duration
	// Logger receives internal failures (never bytes, tokens or owners); nil discards them.
	Logger *slog.Logger

	// Shared makes this registry one node of a hub cluster (RoleHub only): the documents
	// live in this shared log, and Catalog is the cluster's catalog of entries (see
	// SharedLog). Set exactly one of Documents and Shared.
	Shared SharedLog
	// SharedApplyTimeout bounds how long a write waits to come back from the shared log
	// before it is answered as degraded; SharedLoadTimeout how long a load waits to catch up
	// with it; SharedStaleClaim how old an unfinished meta change must be before another node
	// completes it. Zero means the defaults.
	SharedApplyTimeout, SharedLoadTimeout, SharedStaleClaim time.Duration
}

// Compactor returns the store Compactor the registry needs (persistence.Options.Compactor):
// it folds the update log into the snapshot with yjs.MergeUpdates.
func Compactor() persistence.Compactor {
	return func(snapshot []byte, updates [][]byte) ([]byte, error) {
		all := make([][]byte, 0, len(updates)+1)
		if len(snapshot) > 0 {
			all = append(all, snapshot)
		}
		all = append(all, updates...)
		if len(all) == 0 {
			return yjs.MergeUpdates([][]byte{{0, 0}})
		}
		return yjs.MergeUpdates(all)
	}
}

// FeedStateVector is the persistence.ChangeFeedOptions.StateVector of a store the
// registry keeps its documents in: the state vector of a whole document state (a
// namespace's first document, a snapshot), read from the state without building the
// document.
func FeedStateVector(state []byte) ([]byte, error) { return yjs.EncodeStateVectorFromUpdate(state) }

// Registry keeps the namespaces of one instance (docs/protocol.md#terms-and-invariants): it
// creates them (hub), imports bootstrap snapshots (peer), and loads a namespace into a
// runtime — its live document and write sequencer — while leases on it are held. It is safe
// for concurrent use.
type Registry struct {
	cfg    Config
	random io.Reader
	tokens atomic.Uint64   // numbers the records this process publishes to a shared log
	life   context.Context // cancelled when Close gives up waiting
	cancel context.CancelFunc
	wg     sync.WaitGroup // runtime goroutines

	saveTransient, savePermanent atomic.Uint64 // failed snapshot saves (SaveFailures)
	statesEncoded, statesShared  atomic.Uint64 // states given to readers (StateEncodings)

	mu        sync.Mutex // guards closed, loaded, unloading, locks and every runtime's refs
	closed    bool
	loaded    map[string]*nsRuntime // by namespace id: runtimes with leases
	unloading map[string]*nsRuntime // runtimes finishing their last slots
	locks     map[string]*keyLock   // serialise load, import, reset and archive of one id

	closeOnce sync.Once
	closeErr  error

	past pastActivity // what unloaded namespaces did (Activity)
}

// keyLock is a per-namespace lifecycle lock; it exists while someone holds or waits for it.
type keyLock struct {
	ch    chan struct{} // cap 1: holding = a value in it
	users int
}

// New returns a registry over cfg.Catalog and either cfg.Documents or cfg.Shared.
func New(cfg Config) (*Registry, error) {
	if cfg.Role != RoleHub && cfg.Role != RolePeer {
		return nil, fmt.Errorf("registry: Config.Role must be RoleHub or RolePeer")
	}
	if cfg.Catalog == nil {
		return nil, fmt.Errorf("registry: Config.Catalog is required")
	}
	switch {
	case cfg.Documents == nil && cfg.Shared == nil:
		return nil, fmt.Errorf("registry: Config.Documents (a single hub or a peer) or Config.Shared (a node of a hub cluster) is required")
	case cfg.Documents != nil && cfg.Shared != nil:
		return nil, fmt.Errorf("registry: Config.Documents and Config.Shared exclude each other: a node of a hub cluster keeps its documents in the shared log")
	}
	if cfg.Shared != nil && cfg.Role != RoleHub {
		return nil, fmt.Errorf("registry: Config.Shared (a hub cluster) needs RoleHub")
	}
	if cfg.SharedApplyTimeout <= 0 {
		cfg.SharedApplyTimeout = DefaultSharedApplyTimeout
	}
	if cfg.SharedLoadTimeout <= 0 {
		cfg.SharedLoadTimeout = DefaultSharedLoadTimeout
	}
	if cfg.SharedStaleClaim <= 0 {
		cfg.SharedStaleClaim = DefaultSharedStaleClaim
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Random == nil {
		cfg.Random = rand.Reader
	}
	if cfg.MaxQueuedSlots <= 0 {
		cfg.MaxQueuedSlots = DefaultMaxQueuedSlots
	}
	if cfg.SnapshotOnUnloadAfter == 0 {
		cfg.SnapshotOnUnloadAfter = DefaultSnapshotOnUnloadAfter
	}
	if cfg.SaveRetryMin <= 0 {
		cfg.SaveRetryMin = DefaultSaveRetryMin
	}
	if cfg.SaveRetryMax < cfg.SaveRetryMin {
		cfg.SaveRetryMax = max(DefaultSaveRetryMax, cfg.SaveRetryMin)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{
		cfg:       cfg,
		random:    &lockedReader{r: cfg.Random},
		life:      ctx,
		cancel:    cancel,
		loaded:    make(map[string]*nsRuntime),
		unloading: make(map[string]*nsRuntime),
		locks:     make(map[string]*keyLock),
	}, nil
}

// Role returns the configured role.
func (r *Registry) Role() Role { return r.cfg.Role }

func (r *Registry) snapshotOnUnload(appends int) bool {
	return r.cfg.SnapshotOnUnloadAfter > 0 && appends >= r.cfg.SnapshotOnUnloadAfter
}

func (r *Registry) logError(msg, ns string, err error) {
	if r.cfg.Logger != nil {
		r.cfg.Logger.Error(msg, "namespaceId", ns, "err", err)
	}
}

func (r *Registry) logInfo(msg, ns string, attrs ...any) {
	if r.cfg.Logger != nil {
		r.cfg.Logger.Info(msg, append([]any{"namespaceId", ns}, attrs...)...)
	}
}

func (r *Registry) newDoc() *yjs.Doc { return yjs.NewDoc(yjs.WithRandom(r.random)) }

// ---- per-namespace lifecycle lock ----

func (r *Registry) lock(ctx context.Context, ns string) (unlock func(), err error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed.with("registry closed", nil)
	}
	kl := r.locks[ns]
	if kl == nil {
		kl = &keyLock{ch: make(chan struct{}, 1)}
		r.locks[ns] = kl
	}
	kl.users++
	r.mu.Unlock()
	done := func() {
		r.mu.Lock()
		kl.users--
		if kl.users == 0 {
			delete(r.locks, ns)
		}
		r.mu.Unlock()
	}
	select {
	case kl.ch <- struct{}{}:
		return func() { <-kl.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// waitUnloaded waits until no runtime of ns is unloading (caller holds the key lock, so no
// new one can start).
func (r *Registry) waitUnloaded(ctx context.Context, ns string) error {
	r.mu.Lock()
	rt := r.unloading[ns]
	r.mu.Unlock()
	if rt == nil {
		return nil
	}
	select {
	case <-rt.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ---- namespaces ----

// Created describes a namespace made by Create.
type Created struct {
	NamespaceID string
	Identity    Identity
}

// Create (hub) makes a namespace for owner: a fresh id "ns-" + 32 lowercase hex from the
// random source, drawn again at most MaxCreateRetries times on collision, and a
// document whose meta holds a fresh replicationId and replicationEpoch 1, written by the
// registry. The namespace is not left loaded.
func (r *Registry) Create(ctx context.Context, owner string) (Created, error) {
	return r.create(ctx, owner, CreateOptions{})
}

func (r *Registry) create(ctx context.Context, owner string, opts CreateOptions) (Created, error) {
	if r.cfg.Role != RoleHub {
		return Created{}, ErrRoleViolation.with("only the hub creates namespaces", nil)
	}
	if err := r.checkOpen(); err != nil {
		return Created{}, err
	}
	if r.cfg.Shared != nil && !r.cfg.Shared.Healthy() {
		return Created{}, ErrDegraded.with("the cluster has no quorum", nil)
	}
	rid, err := randomHex(r.random)
	if err != nil {
		return Created{}, ErrInternal.with("random source failed", err)
	}
	id := Identity{ReplicationID: rid, Epoch: 1}
	doc := r.newDoc()
	kv := []any{MetaReplicationID, id.ReplicationID, MetaEpoch, float64(id.Epoch)}
	if opts.Name != "" || len(opts.Labels) > 0 {
		if err := errors.Join(persistence.CheckEntryName(opts.Name), persistence.CheckLabels(opts.Labels)); err != nil {
			return Created{}, ErrInvalid.with(err.Error(), err)
		}
		kv = append(kv, namesMeta(opts.Name, opts.Labels)...)
	}
	if err := writeMeta(doc, originCreate, kv...); err != nil {
		return Created{}, ErrInternal.with("writing meta", err)
	}
	snapshot, err := yjs.EncodeStateAsUpdate(doc, nil)
	if err != nil {
		return Created{}, ErrInternal.with("encoding the new document", err)
	}
	for attempt := 0; attempt <= MaxCreateRetries; attempt++ {
		h, err := randomHex(r.random)
		if err != nil {
			return Created{}, ErrInternal.with("random source failed", err)
		}
		ns := "ns-" + h
		e := persistence.Entry{NamespaceID: ns, Owner: owner, State: persistence.StateActive, CreatedAt: r.cfg.Clock.Now(),
			Name: opts.Name, Labels: opts.Labels}
		err = r.cfg.Catalog.CreateEntry(ctx, e, snapshot)
		if errors.Is(err, persistence.ErrExists) {
			continue
		}
		if errors.Is(err, persistence.ErrNameTaken) || errors.Is(err, persistence.ErrInvalid) {
			return Created{}, catalogErr("creating the namespace", err)
		}
		if err != nil {
			return Created{}, storeErr("creating the namespace", err)
		}
		if docs := r.cfg.Documents; docs != nil {
			docs.Release(owner, ns) // CreateEntry leaves it resident; nobody has it open
		}
		return Created{NamespaceID: ns, Identity: id}, nil
	}
	return Created{}, ErrInternal.with(fmt.Sprintf("namespace id collided %d times", MaxCreateRetries+1), nil)
}

// storeErr classifies a store failure.
func storeErr(msg string, err error) error {
	switch {
	case errors.Is(err, persistence.ErrUnavailable):
		return ErrDegraded.with(msg+": the store is unavailable", err)
	case errors.Is(err, persistence.ErrNoSpace):
		return ErrDegraded.with(msg+": the disk holding the store is full", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, persistence.ErrNotFound):
		return ErrNotFound.with("", err)
	case errors.Is(err, persistence.ErrClosed):
		return ErrClosed.with("store closed", err)
	}
	return ErrInternal.with(msg, err)
}

func (r *Registry) checkOpen() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed.with("registry closed", nil)
	}
	return nil
}

// Open returns a lease on the namespace (owner, namespaceID). The first lease loads the
// document (snapshot and log) into a runtime; later ones share it. A namespace that does not
// exist, is archived, or belongs to another owner is ErrNotFound, the same answer in every
// case (docs/protocol.md#authorization). Open may wait for the store (a load, or the unload
// of the same namespace): call it off any goroutine that must not block, and never from a
// registry callback.
func (r *Registry) Open(ctx context.Context, owner, namespaceID string) (*Lease, error) {
	if !ValidNamespaceID(namespaceID) {
		return nil, ErrNotFound.with("", nil)
	}
	if l, err := r.openLoaded(owner, namespaceID); l != nil || err != nil {
		return l, err
	}
	unlock, err := r.lock(ctx, namespaceID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if l, err := r.openLoaded(owner, namespaceID); l != nil || err != nil {
		return l, err
	}
	if err := r.waitUnloaded(ctx, namespaceID); err != nil {
		return nil, err
	}
	ent, err := r.cfg.Catalog.Entry(ctx, namespaceID)
	if err != nil {
		return nil, storeErr("reading the entry", err)
	}
	if ent.Owner == owner && ent.State == persistence.StateDeleted {
		return nil, ErrDeleted.with("", nil)
	}
	if ent.Owner != owner || ent.State != persistence.StateActive {
		return nil, ErrNotFound.with("", nil)
	}
	if r.cfg.Shared != nil {
		return r.openShared(ctx, owner, namespaceID)
	}
	return r.openStored(ctx, r.cfg.Documents, owner, namespaceID)
}

// openStored loads a namespace from the document store of this process (caller holds the
// key lock and checked the entry).
func (r *Registry) openStored(ctx context.Context, docs persistence.Documents, owner, ns string) (*Lease, error) {
	sd, err := docs.Load(ctx, owner, ns)
	if err != nil {
		return nil, storeErr("loading the document", err)
	}
	rt, err := r.loadRuntime(docs, owner, ns, sd)
	if err != nil {
		docs.Release(owner, ns)
		return nil, err
	}
	return r.install(rt)
}

// OwnerOf returns the owner of the active namespace namespaceID (ok false when there is
// none: never created, archived, or not a namespace id). It is for diagnoses only: Open
// answers another owner's namespace as it answers a missing one, and the hub's
// operator, told that a peer was refused, needs to know which of the two it was.
func (r *Registry) OwnerOf(ctx context.Context, namespaceID string) (owner string, ok bool, err error) {
	if !ValidNamespaceID(namespaceID) {
		return "", false, nil
	}
	ent, err := r.cfg.Catalog.Entry(ctx, namespaceID)
	if errors.Is(err, persistence.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, storeErr("reading the entry", err)
	}
	return ent.Owner, ent.State == persistence.StateActive, nil
}

// openLoaded returns a lease on a loaded runtime, or nil.
func (r *Registry) openLoaded(owner, ns string) (*Lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed.with("registry closed", nil)
	}
	rt := r.loaded[ns]
	if rt == nil {
		return nil, nil
	}
	if rt.owner != owner {
		return nil, ErrNotFound.with("", nil)
	}
	rt.refs++
	return &Lease{reg: r, rt: rt}, nil
}

// loadRuntime builds the live document from a stored one, on a runtime that keeps its
// writes in docs.
func (r *Registry) loadRuntime(docs persistence.Documents, owner, ns string, sd persistence.Doc) (*nsRuntime, error) {
	doc := r.newDoc()
	if len(sd.Snapshot) > 0 {
		if err := yjs.ApplyUpdate(doc, sd.Snapshot, nil); err != nil {
			return nil, ErrInternal.with("stored snapshot does not apply", err)
		}
	}
	for _, u := range sd.Updates {
		if err := yjs.ApplyUpdate(doc, u, nil); err != nil {
			return nil, ErrInternal.with("stored update does not apply", err)
		}
	}
	rt, err := newRuntime(r, owner, ns, doc, sd.Through)
	if err != nil {
		return nil, err
	}
	rt.store = newStoreState(docs, len(sd.Updates))
	return rt, nil
}

// install registers a runtime loaded from the document store with one lease and starts its
// goroutine (caller holds the key lock).
func (r *Registry) install(rt *nsRuntime) (*Lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		rt.unsubscribeFn()
		rt.store.docs.Release(rt.owner, rt.ns)
		return nil, ErrClosed.with("registry closed", nil)
	}
	rt.refs = 1
	r.past.seed(rt)
	r.loaded[rt.ns] = rt
	rt.start()
	return &Lease{reg: r, rt: rt}, nil
}

// release drops one lease of rt; the last one unloads it.
func (r *Registry) release(rt *nsRuntime) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt.refs--
	if rt.refs > 0 || r.loaded[rt.ns] != rt {
		return
	}
	delete(r.loaded, rt.ns)
	r.unloading[rt.ns] = rt
	rt.stop()
}

// unloaded is called by a runtime goroutine when it has released the namespace.
func (r *Registry) unloaded(rt *nsRuntime) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unloading[rt.ns] == rt {
		delete(r.unloading, rt.ns)
	}
	if !rt.deleted.Load() {
		r.past.keep(rt.activitySnapshot())
	}
}

// LocalReplica reports whether (owner, namespaceID) has a local replica and its identity —
// what a peer declares in OPEN_NAMESPACE (docs/protocol.md#open_namespace: hasLocalReplica,
// replicationId, replicationEpoch). A missing replica is (Identity{}, false, nil).
func (r *Registry) LocalReplica(ctx context.Context, owner, namespaceID string) (Identity, bool, error) {
	l, err := r.Open(ctx, owner, namespaceID)
	if errors.Is(err, ErrNotFound) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, err
	}
	defer l.Release()
	return l.Identity(), true, nil
}

// Import (peer) installs a bootstrap snapshot as the local replica of (owner, namespaceID)
// and returns a lease on it (docs/protocol.md#bootstrap-steps): the snapshot is applied to a
// detached document, its meta identity must equal want (the OPEN_OK identity: ErrIDMismatch
// / ErrEpochMismatch), and the import is exclusive — a namespace that exists locally, or is
// being imported concurrently, is ErrBootstrapFailed and nothing is overwritten. A malformed
// snapshot or one without identity is ErrBootstrapFailed too.
func (r *Registry) Import(ctx context.Context, owner, namespaceID string, want Identity, snapshot []byte) (*Lease, error) {
	docs := r.cfg.Documents
	if docs == nil {
		return nil, ErrRoleViolation.with("a hub cluster imports no bootstrap snapshot: its namespaces are created by its nodes", nil)
	}
	if !ValidNamespaceID(namespaceID) {
		return nil, ErrBootstrapFailed.with("invalid namespace id", nil)
	}
	doc := r.newDoc()
	if err := yjs.ApplyUpdate(doc, snapshot, nil); err != nil {
		return nil, ErrBootstrapFailed.with("snapshot does not apply", err)
	}
	got, err := readIdentity(doc)
	if err != nil {
		return nil, ErrBootstrapFailed.with("snapshot has no valid identity", err)
	}
	if err := want.compare(got); err != nil {
		return nil, err
	}
	unlock, err := r.lock(ctx, namespaceID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r.mu.Lock()
	busy := r.loaded[namespaceID] != nil || r.unloading[namespaceID] != nil
	r.mu.Unlock()
	if busy {
		return nil, ErrBootstrapFailed.with("namespace already exists locally", nil)
	}
	e := persistence.Entry{NamespaceID: namespaceID, Owner: owner, State: persistence.StateActive, CreatedAt: r.cfg.Clock.Now()}
	if err := r.cfg.Catalog.CreateEntry(ctx, e, snapshot); err != nil {
		if errors.Is(err, persistence.ErrExists) {
			return nil, ErrBootstrapFailed.with("namespace already exists locally", err)
		}
		return nil, storeErr("storing the snapshot", err)
	}
	rt, err := newRuntime(r, owner, namespaceID, doc, 0)
	if err != nil {
		docs.Release(owner, namespaceID)
		return nil, err
	}
	rt.store = newStoreState(docs, 0)
	return r.install(rt)
}

// Reset (peer) archives the local replica of (owner, namespaceID) and forgets it, so the
// next open bootstraps again (the admin reset, the way out of conflicted:
// docs/protocol.md#peer-namespace-states). It is ErrInUse while the namespace is loaded,
// ErrNotFound when there is no replica.
func (r *Registry) Reset(ctx context.Context, owner, namespaceID string) (persistence.ArchiveInfo, error) {
	return r.archive(ctx, owner, namespaceID, persistence.Documents.Reset)
}

// Archive (hub) marks the namespace archived and moves its document into an archive; opening
// it is then ErrNotFound. ErrInUse while loaded; ErrRoleViolation in a hub cluster, which
// keeps no archives.
func (r *Registry) Archive(ctx context.Context, owner, namespaceID string) (persistence.ArchiveInfo, error) {
	return r.archive(ctx, owner, namespaceID, persistence.Documents.Archive)
}

func (r *Registry) archive(ctx context.Context, owner, ns string, op func(persistence.Documents, context.Context, string, string) (persistence.ArchiveInfo, error)) (persistence.ArchiveInfo, error) {
	docs := r.cfg.Documents
	if docs == nil {
		// A hub cluster keeps its documents in the shared log, which keeps no archives.
		return persistence.ArchiveInfo{}, ErrRoleViolation.with("archiving or resetting a namespace is not offered in a hub cluster", nil)
	}
	if !ValidNamespaceID(ns) {
		return persistence.ArchiveInfo{}, ErrNotFound.with("", nil)
	}
	unlock, err := r.lock(ctx, ns)
	if err != nil {
		return persistence.ArchiveInfo{}, err
	}
	defer unlock()
	r.mu.Lock()
	inUse := r.loaded[ns] != nil
	r.mu.Unlock()
	if inUse {
		return persistence.ArchiveInfo{}, ErrInUse.with("", nil)
	}
	if err := r.waitUnloaded(ctx, ns); err != nil {
		return persistence.ArchiveInfo{}, err
	}
	info, err := op(docs, ctx, owner, ns)
	r.past.forget(ns)
	if errors.Is(err, persistence.ErrArchived) {
		return info, ErrNotFound.with("", err)
	}
	if err != nil {
		return info, storeErr("archiving", err)
	}
	return info, nil
}

// Entry describes a stored namespace.
type Entry struct {
	NamespaceID string
	Owner       string
	Archived    bool
	CreatedAt   time.Time
	Loaded      bool // a runtime holds it now
}

// Entries lists the stored namespaces of owner ("" for every owner), by namespace id.
func (r *Registry) Entries(ctx context.Context, owner string) ([]Entry, error) {
	list, err := r.cfg.Catalog.Entries(ctx, owner)
	if err != nil {
		return nil, storeErr("listing entries", err)
	}
	out := make([]Entry, len(list))
	r.mu.Lock()
	for i, e := range list {
		out[i] = Entry{NamespaceID: e.NamespaceID, Owner: e.Owner, Archived: e.State == persistence.StateArchived, CreatedAt: e.CreatedAt}
		out[i].Loaded = r.loaded[e.NamespaceID] != nil
	}
	r.mu.Unlock()
	return out, nil
}

// Loaded returns the number of namespaces loaded now.
func (r *Registry) Loaded() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.loaded)
}

// Close shuts the registry down (docs/protocol.md#restart-and-shutdown, after the
// replication layer closed its sessions and released its leases): no more opens; every
// loaded namespace finishes its admitted slots and unloads (leases still held become
// unusable: ErrClosed). It waits for every goroutine the registry started; when ctx ends
// first, it cancels the waits on the store (a last snapshot may then be lost — the appends
// already queued are not) and still waits for the goroutines, which then exit promptly. It
// does not close the store. Idempotent: later calls wait for and return the first result.
func (r *Registry) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		for ns, rt := range r.loaded {
			delete(r.loaded, ns)
			r.unloading[ns] = rt
			rt.stop()
		}
		r.mu.Unlock()
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			r.closeErr = fmt.Errorf("registry: close: %w", ctx.Err())
			r.cancel()
			r.mu.Lock()
			for _, rt := range r.unloading {
				rt.signal() // a runtime waiting for the cluster log stops waiting
			}
			r.mu.Unlock()
			<-done
		}
		r.cancel()
	})
	return r.closeErr
}
