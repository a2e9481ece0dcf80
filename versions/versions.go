// Package versions keeps named states of the hub's documents — versions — and restores
// them. A version keeps its document's whole encoded state (persistence.VersionStore), so
// it reads the same however the document is compacted or garbage-collected later.
//
// Restoring a version makes the current document equal to it as a new change
// (yjs.RestoreUpdate: what was added since is deleted, what was deleted since is inserted
// again), written like any local write — through the namespace's write sequencer, to the
// store or the cluster's log, to every peer and editor — and recorded in the change feed as
// "restored". Just before it, the current state is taken as a version of its own
// ("before-restore"): restoring that one undoes the restore.
//
// While a namespace is being written, a version is taken automatically every
// Options.AutoEvery (counted from the first write after its previous version), and only
// the newest Options.Keep automatic versions of a namespace are kept. The scheduler follows
// the change feed from a cursor it saves in the catalog's configuration, so that writes
// made just before a restart still get their version.
package versions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// Defaults of Options.
const (
	DefaultKeep = 50
)

// Options configure a Service.
type Options struct {
	Registry *registry.Registry
	Store    persistence.VersionStore
	// Feed records restores (and is what the automatic versions follow).
	Feed changefeed.Source
	// Config keeps the scheduler's cursor (the catalog's configuration map).
	Config persistence.Catalog
	// AutoEvery is the time of activity between automatic versions; zero: none.
	AutoEvery time.Duration
	// Keep is how many automatic versions of a namespace are kept (the newest; manual and
	// before-restore versions are kept until deleted). Zero: DefaultKeep.
	Keep int
	// MaxUpdateBytes is the largest write the node takes: a restore whose change is larger
	// is refused (ErrTooLarge). Zero: no bound.
	MaxUpdateBytes int
	// Leader, when set, says whether this node takes the automatic versions now (one node
	// of a hub cluster does); nil: always.
	Leader func() bool
	Clock  clock.Clock
	Logger *slog.Logger
}

// Errors.
var (
	// ErrTooLarge: the change a restore needs is larger than the node's largest write.
	ErrTooLarge = errors.New("versions: the restore is larger than the largest write")
	// ErrNotFound: no such version.
	ErrNotFound = errors.New("versions: no such version")
)

// Service takes, reads and restores versions.
type Service struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex               // guards restoring
	restoring map[string]chan struct{} // namespaces being restored: one restore at a time each

	auto autoState
}

// New returns a Service. Run starts its automatic versions.
func New(opts Options) *Service {
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, log: log, restoring: map[string]chan struct{}{}}
}

// Take takes a version of the namespace's current document.
func (s *Service) Take(ctx context.Context, owner, ns, label string, kind persistence.VersionKind) (persistence.Version, error) {
	l, err := s.opts.Registry.Open(ctx, owner, ns)
	if err != nil {
		return persistence.Version{}, err
	}
	defer l.Release()
	state, sv, err := l.Capture(ctx)
	if err != nil {
		return persistence.Version{}, err
	}
	return s.put(ctx, ns, label, kind, state, sv)
}

func (s *Service) put(ctx context.Context, ns, label string, kind persistence.VersionKind, state, sv []byte) (persistence.Version, error) {
	v, err := s.opts.Store.PutVersion(ctx, persistence.Version{NamespaceID: ns, Kind: kind, Label: label,
		CreatedAt: s.opts.Clock.Now(), StateVector: sv}, state)
	if err != nil {
		return persistence.Version{}, err
	}
	if kind == persistence.VersionAuto {
		s.prune(ctx, ns)
	}
	return v, nil
}

// prune drops the automatic versions of ns beyond Keep, oldest first.
func (s *Service) prune(ctx context.Context, ns string) {
	list, err := s.opts.Store.Versions(ctx, ns)
	if err != nil {
		return
	}
	var auto []persistence.Version
	for _, v := range list {
		if v.Kind == persistence.VersionAuto {
			auto = append(auto, v)
		}
	}
	for len(auto) > s.opts.Keep {
		if err := s.opts.Store.DeleteVersion(ctx, ns, auto[0].ID); err != nil {
			s.log.Warn("dropping an old automatic version failed; it is tried again with the next one",
				slog.String("namespaceId", ns), slog.String("error", err.Error()))
			return
		}
		auto = auto[1:]
	}
}

// DeleteAll drops every version of a deleted namespace.
func (s *Service) DeleteAll(ctx context.Context, ns string) error {
	return s.opts.Store.DeleteVersions(ctx, ns)
}

// List lists the versions of a namespace, oldest first.
func (s *Service) List(ctx context.Context, ns string) ([]persistence.Version, error) {
	return s.opts.Store.Versions(ctx, ns)
}

// State returns a version and its encoded state (ErrNotFound when there is no such version).
func (s *Service) State(ctx context.Context, ns string, id uint64) (persistence.Version, []byte, error) {
	v, state, err := s.opts.Store.VersionState(ctx, ns, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return v, nil, ErrNotFound
	}
	return v, state, err
}

// Restored is the outcome of a restore.
type Restored struct {
	Version persistence.Version // the version restored
	// Changed is false when the document held exactly what the version holds already:
	// nothing was written, and no version was taken.
	Changed bool
	// Before is the version taken just before the restore (restore it to undo this one).
	Before persistence.Version
	// StateVector is the document's state vector after the restore; UpdateBytes the size
	// of the change written.
	StateVector []byte
	UpdateBytes int
}

// Restore makes the namespace's document hold what version id holds, as a new change.
func (s *Service) Restore(ctx context.Context, owner, ns string, id uint64) (Restored, error) {
	unlock, err := s.lockRestore(ctx, ns)
	if err != nil {
		return Restored{}, err
	}
	defer unlock()
	v, target, err := s.State(ctx, ns, id)
	if err != nil {
		return Restored{}, err
	}
	l, err := s.opts.Registry.Open(ctx, owner, ns)
	if err != nil {
		return Restored{}, err
	}
	defer l.Release()
	current, currentSV, err := l.Capture(ctx)
	if err != nil {
		return Restored{}, err
	}
	update, err := yjs.RestoreUpdate(current, target, registry.MetaRoot)
	if err != nil {
		return Restored{}, fmt.Errorf("versions: computing the restore: %w", err)
	}
	out := Restored{Version: v, StateVector: currentSV}
	if update == nil {
		return out, nil
	}
	if max := s.opts.MaxUpdateBytes; max > 0 && len(update) > max {
		return Restored{}, fmt.Errorf("%w: restoring version %d of %s is a change of %d bytes, and the node takes at most %d in one write",
			ErrTooLarge, id, ns, len(update), max)
	}
	out.Before, err = s.put(ctx, ns, fmt.Sprintf("before restoring version %d", id), persistence.VersionBeforeRestore, current, currentSV)
	if err != nil {
		return Restored{}, err
	}
	res, err := l.WriteLocal(ctx, update)
	if err != nil {
		return Restored{}, err
	}
	if res.Seq > 0 {
		if err := l.WaitFlushed(ctx, res.Seq); err != nil {
			return Restored{}, err
		}
	}
	out.Changed, out.UpdateBytes = true, len(update)
	if out.StateVector, err = l.StateVector(ctx); err != nil {
		return Restored{}, err
	}
	if s.opts.Feed != nil {
		err := s.opts.Feed.Record(ctx, changefeed.Event{Kind: persistence.ChangeRestored, Owner: owner, NamespaceID: ns, StateVector: out.StateVector})
		if err != nil {
			// The restore is written (and in the feed as an update); only its mark is missing.
			s.log.Warn("the restore was written, but the change feed has no \"restored\" change for it (it has the update)",
				slog.String("namespaceId", ns), slog.String("error", err.Error()))
		}
	}
	return out, nil
}

// lockRestore waits until no other restore of ns runs on this node, then holds it.
func (s *Service) lockRestore(ctx context.Context, ns string) (func(), error) {
	for {
		s.mu.Lock()
		ch, busy := s.restoring[ns]
		if !busy {
			ch = make(chan struct{})
			s.restoring[ns] = ch
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.restoring, ns)
				s.mu.Unlock()
				close(ch)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
