package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/backup"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// Restoring a hub from a backup (hub restore). The backup is checked whole first — its
// checksum, and for a single hub's store every record of it — and only then written into
// the data directory, which must not hold a store already. A restored directory carries a
// note, DATA/restored.json, that the hub reads at start: it says when the backup was taken,
// so that the hub can tell an operator why a peer asks for a namespace it does not know
// (one created after the backup) and what to do.

// RestoredFile is the note a restore leaves in the data directory.
const RestoredFile = "restored.json"

// ClusterRestoreFile is where a restore of a hub cluster's backup puts the backup, for the
// node started on that directory to load into the cluster.
const ClusterRestoreFile = "restore-pending.backup"

// Restored is the note of a restore (DATA/restored.json).
type Restored struct {
	BackupCreatedAt time.Time `json:"backupCreatedAt"`
	RestoredAt      time.Time `json:"restoredAt"`
	From            string    `json:"from"`
	InstanceID      string    `json:"instanceId"`
	Kind            string    `json:"kind"` // backup.KindHub or backup.KindHubCluster
	// Fence: every namespace's epoch was (or, in a cluster, is to be) raised, so peers are
	// fenced instead of merging what they hold back.
	Fence bool `json:"fence"`
	// Namespaces is how many namespaces the backup holds.
	Namespaces int `json:"namespaces"`
	// Pending (cluster): the backup waits in ClusterRestoreFile for the node to load it
	// into an empty cluster at start.
	Pending bool `json:"pending,omitempty"`
}

// ReadRestored reads the note of a restore in dir (ok false when there is none).
func ReadRestored(dir string) (Restored, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, RestoredFile))
	if errors.Is(err, os.ErrNotExist) {
		return Restored{}, false, nil
	}
	if err != nil {
		return Restored{}, false, err
	}
	var r Restored
	if err := json.Unmarshal(b, &r); err != nil {
		return Restored{}, false, fmt.Errorf("%s: %v", filepath.Join(dir, RestoredFile), err)
	}
	return r, true, nil
}

// WriteRestored writes the note of a restore in dir (atomically).
func WriteRestored(dir string, r Restored) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, RestoredFile), append(b, '\n'), 0o600)
}

// writeFileAtomic writes data to a temporary file beside path, syncs it and renames it
// over path.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// RestoreOptions say what to restore where.
type RestoreOptions struct {
	From  string // the backup file
	Data  string // the data directory to prepare
	Fence bool   // raise every namespace's epoch (peers are fenced; they reset)
	Clock clock.Clock
	Log   *slog.Logger
}

// Restore prepares a data directory from a backup. A single hub's backup becomes the
// directory's store and tokens file, checked record by record (with Fence, every
// namespace's epoch is raised in it); a hub cluster's is checked and put in
// ClusterRestoreFile, for the node started on the directory to load into an empty cluster.
// Either way the directory gets its note (RestoredFile).
func Restore(ctx context.Context, o RestoreOptions) (Restored, error) {
	f, err := os.Open(o.From)
	if err != nil {
		return Restored{}, err
	}
	defer f.Close()
	h, err := backup.Verify(f)
	if err != nil {
		return Restored{}, fmt.Errorf("%s: %w", o.From, err)
	}
	if err := checkEmptyData(o.Data); err != nil {
		return Restored{}, err
	}
	if err := os.MkdirAll(o.Data, 0o700); err != nil {
		return Restored{}, fmt.Errorf("data dir %s: %w", o.Data, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Restored{}, err
	}
	note := Restored{BackupCreatedAt: h.CreatedAt, RestoredAt: o.Clock.Now().UTC(), From: o.From, InstanceID: h.InstanceID,
		Kind: h.Kind, Fence: o.Fence}
	switch h.Kind {
	case backup.KindHub:
		if note.Namespaces, err = restoreHub(ctx, f, o); err != nil {
			return Restored{}, err
		}
	case backup.KindHubCluster:
		var tokens []byte
		if note.Namespaces, tokens, err = stageClusterRestore(f, o.Data); err != nil {
			return Restored{}, err
		}
		if err := restoreTokens(o, tokens); err != nil {
			return Restored{}, err
		}
		note.Pending = true
	default:
		return Restored{}, fmt.Errorf("%s: a backup of kind %q, which this version does not restore", o.From, h.Kind)
	}
	return note, WriteRestored(o.Data, note)
}

// checkEmptyData refuses a data directory that holds a store (a single hub's or a cluster
// node's) or a restore already.
func checkEmptyData(dir string) error {
	for _, name := range []string{persistence.FileName, "jetstream", ClusterRestoreFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("data dir %s already holds %s: restore into a new, empty directory (or move %s aside first); a restore never overwrites a store",
				dir, name, filepath.Join(dir, name))
		}
	}
	return nil
}

// restoreHub writes a single hub's backup into o.Data and returns how many namespaces it
// holds.
func restoreHub(ctx context.Context, f io.Reader, o RestoreOptions) (int, error) {
	r, err := backup.NewReader(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", o.From, err)
	}
	storePath := filepath.Join(o.Data, persistence.FileName)
	tmp := storePath + ".restoring"
	var tokens []byte
	wrote := false
	defer os.Remove(tmp)
	for {
		kind, size, body, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", o.From, err)
		}
		switch kind {
		case backup.KindStore:
			if wrote {
				return 0, fmt.Errorf("%s: two store sections", o.From)
			}
			if err := writeRestoredStore(tmp, body); err != nil {
				return 0, err
			}
			wrote = true
		case backup.KindTokens:
			if tokens, err = r.ReadAll(size); err != nil {
				return 0, fmt.Errorf("%s: %w", o.From, err)
			}
		}
	}
	if !wrote {
		return 0, fmt.Errorf("%s: the backup holds no store", o.From)
	}
	// The copy is of a store as it was; check all of it before it becomes the hub's.
	st, err := persistence.OpenBolt(tmp, persistence.Options{Compactor: registry.Compactor()})
	if err != nil {
		return 0, fmt.Errorf("the store in %s does not open: %v", o.From, err)
	}
	n, err := checkAndFence(ctx, st, o)
	if cerr := st.Close(context.Background()); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, storePath); err != nil {
		return 0, err
	}
	if err := restoreTokens(o, tokens); err != nil {
		return 0, err
	}
	return n, syncDir(o.Data)
}

// restoreTokens writes the backup's tokens file into the data directory, unless it has one.
func restoreTokens(o RestoreOptions, tokens []byte) error {
	if tokens == nil {
		return nil
	}
	tokensPath := filepath.Join(o.Data, auth.FileName)
	if _, err := os.Stat(tokensPath); err == nil {
		o.Log.Warn("the data directory has a tokens file already; it is kept, and the backup's is not restored", slog.String("tokens", tokensPath))
		return nil
	}
	return writeFileAtomic(tokensPath, tokens, 0o600)
}

// writeRestoredStore writes the store section to path and syncs it.
func writeRestoredStore(path string, body io.Reader) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, body); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkAndFence checks every record of a restored store and, with o.Fence, raises the
// epoch of each of its namespaces. It returns the number of namespaces.
func checkAndFence(ctx context.Context, st *persistence.BoltStore, o RestoreOptions) (int, error) {
	if err := st.Verify(ctx); err != nil {
		return 0, fmt.Errorf("the store in %s is damaged (it was when the backup was taken): %v", o.From, OneLine(err))
	}
	entries, err := st.Entries(ctx, "")
	if err != nil {
		return 0, err
	}
	if !o.Fence {
		return len(entries), nil
	}
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Documents: st, Clock: o.Clock, Logger: o.Log})
	if err != nil {
		return 0, err
	}
	defer reg.Close(context.Background())
	n, err := FenceAll(ctx, reg, o.Log)
	return max(n, len(entries)), err
}

// FenceAll raises the epoch of every active namespace of reg, so that every peer that
// reconnects with a replica of it is fenced (IDENTITY_CHANGED: its target is conflicted
// until it resets) instead of merging what it holds back. It returns how many it raised.
func FenceAll(ctx context.Context, reg *registry.Registry, log *slog.Logger) (int, error) {
	entries, err := reg.Entries(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if e.Archived {
			continue
		}
		l, err := reg.Open(ctx, e.Owner, e.NamespaceID)
		if err != nil {
			return n, fmt.Errorf("fencing %s: %v", e.NamespaceID, err)
		}
		id, err := l.BumpEpoch(ctx)
		l.Release()
		if err != nil {
			return n, fmt.Errorf("fencing %s: %v", e.NamespaceID, err)
		}
		log.Info("namespace fenced after the restore: its peers reset their replicas", slog.String("namespaceId", e.NamespaceID),
			slog.Uint64("epoch", id.Epoch))
		n++
	}
	return n, nil
}

// stageClusterRestore copies a hub cluster's backup into dir for the node to load, and
// returns how many namespaces it holds and its tokens file.
func stageClusterRestore(f io.Reader, dir string) (int, []byte, error) {
	dst := filepath.Join(dir, ClusterRestoreFile)
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, nil, err
	}
	defer os.Remove(tmp)
	r, err := backup.NewReader(io.TeeReader(f, out))
	n := 0
	var tokens []byte
	for err == nil {
		var kind backup.Kind
		var size int64
		kind, size, _, err = r.Next()
		switch {
		case err != nil:
		case kind == backup.KindNamespace:
			n++
		case kind == backup.KindTokens:
			tokens, err = r.ReadAll(size)
		}
	}
	if !errors.Is(err, io.EOF) {
		out.Close()
		return 0, nil, err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return 0, nil, err
	}
	if err := out.Close(); err != nil {
		return 0, nil, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, nil, err
	}
	return n, tokens, syncDir(dir)
}

// syncDir syncs a directory, so that the names just written in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
