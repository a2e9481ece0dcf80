package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/persistence"
)

// The versions of a hub cluster live where every node reads them: each version's
// description in the configuration bucket, under versions/<namespaceId>/<id> (ids padded so
// that the keys sort in the order taken), and its encoded state in the snapshot object
// store as version.<namespaceId>.<id> — apart from the namespace's snapshot and log, so
// compaction never touches it. A namespace's next id is a counter in the configuration
// bucket, moved by compare-and-set, so two nodes taking versions at once get different ids.

const (
	versionsPrefix    = "versions/"
	versionNextPrefix = "versions-next/"
)

// Versions returns the node's version store.
func (n *Node) Versions() persistence.VersionStore { return clusterVersions{n} }

type clusterVersions struct{ n *Node }

var _ persistence.VersionStore = clusterVersions{}

func versionKey(ns string, id uint64) string {
	return fmt.Sprintf("%s%s/%020d", versionsPrefix, ns, id)
}
func versionObject(ns string, id uint64) string {
	return "version." + ns + "." + strconv.FormatUint(id, 10)
}

// versionRecord is a version's description as the configuration bucket keeps it.
type versionRecord struct {
	ID          uint64    `json:"id"`
	Kind        uint8     `json:"kind"`
	Label       string    `json:"label"`
	CreatedAt   time.Time `json:"createdAt"`
	StateVector []byte    `json:"stateVector"`
	StateBytes  int       `json:"stateBytes"`
}

func (r versionRecord) version(ns string) persistence.Version {
	return persistence.Version{NamespaceID: ns, ID: r.ID, Kind: persistence.VersionKind(r.Kind), Label: r.Label,
		CreatedAt: r.CreatedAt, StateVector: r.StateVector, StateBytes: r.StateBytes}
}

func checkVersionNS(ns string) error {
	if ns == "" || len(ns) > persistence.MaxNameBytes || strings.ContainsAny(ns, "./ ") {
		return fmt.Errorf("%w: namespace id %q", persistence.ErrInvalid, ns)
	}
	return nil
}

// nextVersionID takes the namespace's next version id.
func (c clusterVersions) nextVersionID(ctx context.Context, ns string) (uint64, error) {
	key := configKey(versionNextPrefix + ns)
	var id uint64
	err := c.n.op(ctx, "numbering a version", func(ctx context.Context, r *resources) error {
		for ctx.Err() == nil {
			e, err := r.config.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				if _, err := r.config.Create(ctx, key, []byte("1")); err == nil {
					id = 1
					return nil
				} else if !errors.Is(err, jetstream.ErrKeyExists) {
					return err
				}
			case err != nil:
				return err
			default:
				last, perr := strconv.ParseUint(string(e.Value()), 10, 64)
				if perr != nil {
					return fmt.Errorf("the version counter of %s holds %q", ns, e.Value())
				}
				if _, err := r.config.Update(ctx, key, []byte(strconv.FormatUint(last+1, 10)), e.Revision()); err == nil {
					id = last + 1
					return nil
				} else if !errors.Is(err, jetstream.ErrKeyExists) && !strings.Contains(err.Error(), "wrong last sequence") {
					return err
				}
			}
		}
		return ctx.Err()
	})
	return id, err
}

// PutVersion implements persistence.VersionStore.
func (c clusterVersions) PutVersion(ctx context.Context, v persistence.Version, state []byte) (persistence.Version, error) {
	if err := checkVersionNS(v.NamespaceID); err != nil {
		return persistence.Version{}, err
	}
	if len(v.Label) > persistence.MaxVersionLabelBytes || v.Kind < persistence.VersionManual || v.Kind > persistence.VersionBeforeRestore {
		return persistence.Version{}, fmt.Errorf("%w: a version of kind %v with a label of %d bytes", persistence.ErrInvalid, v.Kind, len(v.Label))
	}
	id, err := c.nextVersionID(ctx, v.NamespaceID)
	if err != nil {
		return persistence.Version{}, err
	}
	rec := versionRecord{ID: id, Kind: uint8(v.Kind), Label: v.Label, CreatedAt: v.CreatedAt.UTC().Truncate(time.Millisecond),
		StateVector: append([]byte(nil), v.StateVector...), StateBytes: len(state)}
	b, err := json.Marshal(rec)
	if err != nil {
		return persistence.Version{}, err
	}
	// The state first: a description is only ever written for a state that is there.
	err = c.n.op(ctx, "saving a version", func(ctx context.Context, r *resources) error {
		if _, err := r.snaps.Put(ctx, jetstream.ObjectMeta{Name: versionObject(v.NamespaceID, id)}, bytes.NewReader(state)); err != nil {
			return err
		}
		_, err := r.config.Put(ctx, configKey(versionKey(v.NamespaceID, id)), b)
		return err
	})
	if err != nil {
		return persistence.Version{}, err
	}
	return rec.version(v.NamespaceID), nil
}

// record reads one version's description.
func (c clusterVersions) record(ctx context.Context, ns string, id uint64) (versionRecord, error) {
	var rec versionRecord
	err := c.n.read(ctx, "reading a version", func(ctx context.Context, r *resources) error {
		e, err := r.config.Get(ctx, configKey(versionKey(ns, id)))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return persistence.ErrNotFound
		}
		if err != nil {
			return err
		}
		return json.Unmarshal(e.Value(), &rec)
	})
	return rec, err
}

// Versions implements persistence.VersionStore.
func (c clusterVersions) Versions(ctx context.Context, ns string) ([]persistence.Version, error) {
	if err := checkVersionNS(ns); err != nil {
		return nil, err
	}
	keys, err := c.n.Store().ConfigKeys(ctx, versionsPrefix+ns+"/")
	if err != nil {
		return nil, err
	}
	out := make([]persistence.Version, 0, len(keys))
	for _, k := range keys { // sorted: the padded ids in the order taken
		id, err := strconv.ParseUint(strings.TrimPrefix(k, versionsPrefix+ns+"/"), 10, 64)
		if err != nil {
			continue
		}
		rec, err := c.record(ctx, ns, id)
		if errors.Is(err, persistence.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec.version(ns))
	}
	return out, nil
}

// VersionState implements persistence.VersionStore.
func (c clusterVersions) VersionState(ctx context.Context, ns string, id uint64) (persistence.Version, []byte, error) {
	if err := checkVersionNS(ns); err != nil {
		return persistence.Version{}, nil, err
	}
	rec, err := c.record(ctx, ns, id)
	if err != nil {
		return persistence.Version{}, nil, err
	}
	var state []byte
	err = c.n.read(ctx, "reading a version's state", func(ctx context.Context, r *resources) error {
		b, err := r.snaps.GetBytes(ctx, versionObject(ns, id))
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return persistence.ErrNotFound
		}
		state = b
		return err
	})
	return rec.version(ns), state, err
}

// DeleteVersion implements persistence.VersionStore.
func (c clusterVersions) DeleteVersion(ctx context.Context, ns string, id uint64) error {
	if err := checkVersionNS(ns); err != nil {
		return err
	}
	// The description first: a state without one is never listed.
	return c.n.op(ctx, "deleting a version", func(ctx context.Context, r *resources) error {
		if err := r.config.Delete(ctx, configKey(versionKey(ns, id))); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		if err := r.snaps.Delete(ctx, versionObject(ns, id)); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return err
		}
		return nil
	})
}

// DeleteVersions implements persistence.VersionStore.
func (c clusterVersions) DeleteVersions(ctx context.Context, ns string) error {
	list, err := c.Versions(ctx, ns)
	if err != nil {
		return err
	}
	for _, v := range list {
		if err := c.DeleteVersion(ctx, ns, v.ID); err != nil {
			return err
		}
	}
	return nil
}
