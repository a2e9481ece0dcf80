package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/replication/namespace"
)

// A damaged store. A node checks its whole store when it starts (every page it reaches
// and every record's checksum: persistence.BoltStore.Verify) and refuses to start on a
// damaged one, rather than serve part of it and fail later, namespace by namespace. What
// to do depends on the side: a hub's store is the reference copy, restored from a backup;
// a peer's holds replicas the hub can send again (--rebuild-damaged-store).

// DamagedStoreError is a data directory whose store file failed its check: damaged pages,
// records that do not match their checksums, a file cut short.
type DamagedStoreError struct {
	Dir, File string
	Cause     error // the *persistence.CorruptError (several, joined, for Verify)
}

func (e *DamagedStoreError) Error() string {
	first, more := e.Cause, 0
	var multi interface{ Unwrap() []error }
	if errors.As(e.Cause, &multi) {
		if errs := multi.Unwrap(); len(errs) > 0 {
			first, more = errs[0], len(errs)-1
		}
	}
	what := ": " + strings.TrimPrefix(first.Error(), "persistence: ")
	var ce *persistence.CorruptError
	switch {
	case errors.As(first, &ce) && ce.Where != "":
		what = " at " + ce.Where + ": " + ce.Reason
	case errors.As(first, &ce):
		what = ": " + ce.Reason
	}
	msg := fmt.Sprintf("data dir %s: the store file %s is damaged%s", e.Dir, e.File, what)
	if more > 0 {
		msg += fmt.Sprintf(" (and %d more problems: nmcr store check %s lists them)", more, e.Dir)
	}
	return msg
}

func (e *DamagedStoreError) Unwrap() error { return e.Cause }

// HubDamagedFix is what a hub's operator does about a damaged store.
func HubDamagedFix(dir string) string {
	return fmt.Sprintf("the hub does not start on it: restore the hub from a backup into another directory (hub restore --from BACKUP "+
		"--data NEWDIR) and start the hub on that; keep %s for nmcr store check (docs/operations.md: A damaged store)", dir)
}

// PeerDamagedFix is what a peer's operator does about a damaged store.
func PeerDamagedFix() string {
	return "start the peer with --rebuild-damaged-store: the file is moved aside, kept for nmcr store export, and every " +
		"target bootstraps again from the hub (docs/operations.md: A damaged store)"
}

// Rebuilt is what RebuildDamagedStore did.
type Rebuilt struct {
	Archived string             // where the damaged file went
	Targets  []namespace.Target // the targets read back from it
	Lost     error              // why the targets could not all be read back (nil: they were)
	// Unreplicated are the namespaces whose local writes the hub did not hold yet, as the
	// damaged store's ledger said, with their bytes: they are only in the moved file now.
	Unreplicated map[string]int64
}

// RebuildDamagedStore moves the damaged store file of a peer's data directory aside — to
// nomicore.db.damaged-<UTC time> in the same directory — after reading back from it what it
// still can: the peer's targets, and its ledger of local writes the hub did not hold. The
// next open starts an empty store, into which the caller puts the targets back; their
// replicas bootstrap again from the hub.
func RebuildDamagedStore(dir string, now time.Time, log *slog.Logger) (Rebuilt, error) {
	file := filepath.Join(dir, persistence.FileName)
	var rb Rebuilt
	rb.Targets, rb.Unreplicated, rb.Lost = salvage(file)
	rb.Archived = file + ".damaged-" + now.UTC().Format("20060102T150405Z")
	if err := os.Rename(file, rb.Archived); err != nil {
		return Rebuilt{}, fmt.Errorf("moving the damaged store aside: %w", err)
	}
	attrs := []any{slog.String("movedTo", rb.Archived), slog.Int("targets", len(rb.Targets))}
	if rb.Lost != nil {
		attrs = append(attrs, slog.String("targetsNotReadBack", rb.Lost.Error()))
	}
	for ns, n := range rb.Unreplicated {
		attrs = append(attrs, slog.Int64("unreplicatedBytes."+ns, n))
	}
	log.Warn("the store was damaged: it was moved aside and the peer starts with a new one; every target bootstraps again "+
		"from the hub. Local writes the hub did not have yet are only in the moved file: nmcr store export "+rb.Archived+
		" NAMESPACE prints a namespace's document from it", attrs...)
	return rb, nil
}

// salvage reads a damaged store's targets and ledger, as far as it can.
func salvage(file string) ([]namespace.Target, map[string]int64, error) {
	st, err := persistence.OpenBolt(file, persistence.Options{ReadOnly: true, LockTimeout: time.Second})
	if err != nil {
		return nil, nil, err
	}
	defer st.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	targets, err := LoadTargets(ctx, st)
	ledger, _ := loadLedger(ctx, st)
	return targets, ledger, err
}
