package persistence

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Versions of a namespace's document: named states an application (or the hub, on its own)
// took, to read later or to restore. Each keeps its own encoded state — a whole document
// state as one Yjs update — apart from the document: the live document collects the
// garbage of what is deleted and its log is compacted, and neither touches a version.

// VersionKind says who took a version.
type VersionKind uint8

// Version kinds.
const (
	VersionManual        VersionKind = 1 // asked for (POST …/versions)
	VersionAuto          VersionKind = 2 // taken on a schedule while the namespace is written
	VersionBeforeRestore VersionKind = 3 // taken just before a restore, to undo it
)

func (k VersionKind) String() string {
	switch k {
	case VersionManual:
		return "manual"
	case VersionAuto:
		return "auto"
	case VersionBeforeRestore:
		return "before-restore"
	}
	return "VersionKind(" + strconv.Itoa(int(k)) + ")"
}

// Version describes one version (its state is read with VersionState).
type Version struct {
	NamespaceID string
	ID          uint64 // 1, 2, … per namespace, in the order taken
	Kind        VersionKind
	Label       string
	CreatedAt   time.Time // milliseconds
	StateVector []byte    // the document's encoded state vector then
	StateBytes  int       // the size of its encoded state
}

// MaxVersionLabelBytes bounds a version's label.
const MaxVersionLabelBytes = 1024

// VersionStore keeps the versions of namespaces. BoltStore and MemoryStore implement it; a
// hub cluster keeps them in JetStream (cluster.Node.Versions).
type VersionStore interface {
	// PutVersion stores a version of namespaceID with its encoded state and returns it with
	// its id. v.NamespaceID, v.Kind, v.Label, v.CreatedAt and v.StateVector are kept.
	PutVersion(ctx context.Context, v Version, state []byte) (Version, error)
	// Versions lists the versions of namespaceID, oldest first.
	Versions(ctx context.Context, namespaceID string) ([]Version, error)
	// VersionState returns a version and its encoded state, or ErrNotFound.
	VersionState(ctx context.Context, namespaceID string, id uint64) (Version, []byte, error)
	// DeleteVersion removes one version; removing an absent one is not an error.
	DeleteVersion(ctx context.Context, namespaceID string, id uint64) error
	// DeleteVersions removes every version of namespaceID (when the namespace is deleted).
	DeleteVersions(ctx context.Context, namespaceID string) error
}

var _ VersionStore = (*engine)(nil)

func checkVersion(v Version) error {
	if err := checkName("namespace id", v.NamespaceID); err != nil {
		return err
	}
	if len(v.Label) > MaxVersionLabelBytes {
		return fmt.Errorf("%w: a version label of %d bytes (at most %d)", ErrInvalid, len(v.Label), MaxVersionLabelBytes)
	}
	if v.Kind < VersionManual || v.Kind > VersionBeforeRestore {
		return fmt.Errorf("%w: version kind %d", ErrInvalid, v.Kind)
	}
	return nil
}

// PutVersion implements VersionStore.
func (e *engine) PutVersion(ctx context.Context, v Version, state []byte) (Version, error) {
	if err := checkVersion(v); err != nil {
		return Version{}, err
	}
	v.CreatedAt = v.CreatedAt.Truncate(time.Millisecond).UTC()
	v.StateBytes = len(state)
	err := e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error {
			var err error
			v.ID, err = w.putVersion(v, state)
			return err
		})
	})
	return v, err
}

// Versions implements VersionStore.
func (e *engine) Versions(ctx context.Context, ns string) (list []Version, err error) {
	if err := checkName("namespace id", ns); err != nil {
		return nil, err
	}
	err = e.view(ctx, func(r reader) error {
		list, err = r.versions(ns)
		return err
	})
	return list, err
}

// VersionState implements VersionStore.
func (e *engine) VersionState(ctx context.Context, ns string, id uint64) (v Version, state []byte, err error) {
	if err := checkName("namespace id", ns); err != nil {
		return Version{}, nil, err
	}
	err = e.view(ctx, func(r reader) error {
		v, state, err = r.version(ns, id)
		return err
	})
	return v, state, err
}

// DeleteVersion implements VersionStore.
func (e *engine) DeleteVersion(ctx context.Context, ns string, id uint64) error {
	if err := checkName("namespace id", ns); err != nil {
		return err
	}
	return e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error { return w.deleteVersion(ns, id) })
	})
}

// DeleteVersions implements VersionStore.
func (e *engine) DeleteVersions(ctx context.Context, ns string) error {
	if err := checkName("namespace id", ns); err != nil {
		return err
	}
	return e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error { return w.deleteVersions(ns) })
	})
}
