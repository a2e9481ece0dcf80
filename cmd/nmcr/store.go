package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nomicore/nomicore/internal/envflag"
	"github.com/nomicore/nomicore/persistence"
)

func init() { register("store", runStore) }

const storeUsage = `usage:
  nmcr store ls PATH
      one JSON line per namespace entry, per document without an entry, and per archive
  nmcr store export PATH NAMESPACE [--archive N] [--owner OWNER]
      the document as lines of hex: its snapshot (when not empty), then each logged
      update in order — input for "nmcr doc json" and the other doc commands
PATH is a store file or an instance's data directory (holding nomicore.db). The store is
opened read-only; a store in use by a running hub or peer is refused. Exit status: 0 done,
1 the store could not be read, 2 bad usage. Every flag also reads NOMICORE_<FLAG>.
`

// runStore is `nmcr store ls|export` (GUIDE §7): an offline look into a bbolt store.
func runStore(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sub, code, ok := subcommand("store", storeUsage, args, stdout, stderr, "ls", "export")
	if !ok {
		return code
	}
	fs := flag.NewFlagSet("nmcr store "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	archive := fs.Uint64("archive", 0, "export archive N of the namespace instead of its live document")
	owner := fs.String("owner", "", "the owner of a document that has no entry")
	if err := envflag.Apply(fs, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "nmcr store: %v\n", err)
		return 2
	}
	var pos []string // flags may come before, between or after the operands
	for rest := args[1:]; ; {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	want := map[string]int{"ls": 1, "export": 2}[sub]
	if len(pos) != want {
		fmt.Fprintf(stderr, "nmcr store %s: want %d operand(s), got %d\n%s", sub, want, len(pos), storeUsage)
		return 2
	}

	st, err := openStoreReadOnly(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "nmcr store: %v\n", err)
		return 1
	}
	defer st.Close(context.Background())
	ctx := context.Background()
	if sub == "ls" {
		err = storeList(ctx, st, stdout)
	} else {
		err = storeExport(ctx, st, pos[1], *archive, *owner, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "nmcr store %s: %v\n", sub, err)
		return 1
	}
	return 0
}

func openStoreReadOnly(path string) (*persistence.BoltStore, error) {
	opts := persistence.Options{ReadOnly: true, LockTimeout: time.Second}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return persistence.OpenDataDir(path, opts)
	} else if err != nil {
		return nil, err
	}
	return persistence.OpenBolt(filepath.Clean(path), opts)
}

// storeLine is one line of `nmcr store ls`.
type storeLine struct {
	NamespaceID     string            `json:"namespaceId"`
	Owner           string            `json:"owner"`
	Archive         uint64            `json:"archive,omitempty"` // archive lines only
	Reason          string            `json:"reason,omitempty"`  // archive lines only
	State           string            `json:"state"`             // active, archived, or no-entry
	CreatedAt       string            `json:"createdAt,omitempty"`
	Meta            map[string]string `json:"meta,omitempty"`
	HasDoc          bool              `json:"hasDoc"`
	SnapshotBytes   int               `json:"snapshotBytes"`
	SnapshotThrough uint64            `json:"snapshotThrough"`
	LogUpdates      int               `json:"logUpdates"`
	LogBytes        int               `json:"logBytes"`
	Through         uint64            `json:"through"`
}

func lineFor(e persistence.Entry, d persistence.DocInfo) storeLine {
	return storeLine{
		NamespaceID: e.NamespaceID, Owner: e.Owner, State: e.State.String(),
		CreatedAt: e.CreatedAt.UTC().Format(time.RFC3339Nano), Meta: e.Meta,
		HasDoc: d.HasDoc, SnapshotBytes: d.SnapshotBytes, SnapshotThrough: d.SnapshotThrough,
		LogUpdates: d.LogUpdates, LogBytes: d.LogBytes, Through: d.Through,
	}
}

// storeList prints the entries (with the size of their documents), the documents that have
// no entry, then the archives.
func storeList(ctx context.Context, st *persistence.BoltStore, w io.Writer) error {
	entries, err := st.Entries(ctx, "")
	if err != nil {
		return err
	}
	docs, err := st.Docs(ctx)
	if err != nil {
		return err
	}
	archives, err := st.Archives(ctx, "")
	if err != nil {
		return err
	}
	type key struct{ owner, ns string }
	byKey := map[key]persistence.DocInfo{}
	for _, d := range docs {
		byKey[key{d.Owner, d.NamespaceID}] = d
	}
	enc := json.NewEncoder(w)
	for _, e := range entries {
		k := key{e.Owner, e.NamespaceID}
		d := byKey[k]
		delete(byKey, k)
		if err := enc.Encode(lineFor(e, d)); err != nil {
			return err
		}
	}
	for _, d := range docs {
		if _, orphan := byKey[key{d.Owner, d.NamespaceID}]; orphan {
			l := lineFor(persistence.Entry{NamespaceID: d.NamespaceID, Owner: d.Owner}, d)
			l.State, l.CreatedAt = "no-entry", ""
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
	}
	for _, a := range archives {
		l := lineFor(a.Entry, a.DocInfo)
		l.Archive, l.Reason = a.ID, a.Reason.String()
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}

// storeExport prints a document (or an archived one) as hex lines.
func storeExport(ctx context.Context, st *persistence.BoltStore, ns string, archive uint64, owner string, w io.Writer) error {
	var doc persistence.Doc
	var err error
	switch {
	case archive > 0:
		doc, err = st.LoadArchive(ctx, ns, archive)
	default:
		if owner == "" {
			e, eerr := st.Entry(ctx, ns)
			if eerr != nil {
				if errors.Is(eerr, persistence.ErrNotFound) {
					return fmt.Errorf("no entry for %s (give --owner to export a document without one)", ns)
				}
				return eerr
			}
			owner = e.Owner
		}
		doc, err = st.Load(ctx, owner, ns)
	}
	if errors.Is(err, persistence.ErrNotFound) {
		if archive > 0 {
			return fmt.Errorf("no archive %d of %s", archive, ns)
		}
		return fmt.Errorf("no document %s of owner %s (archived or reset? see nmcr store ls)", ns, owner)
	}
	if err != nil {
		return err
	}
	var out []byte
	if len(doc.Snapshot) > 0 {
		out = append(hex.AppendEncode(out, doc.Snapshot), '\n')
	}
	for _, u := range doc.Updates {
		out = append(hex.AppendEncode(out, u), '\n')
		if len(out) > 1<<20 {
			if _, err := w.Write(out); err != nil {
				return err
			}
			out = out[:0]
		}
	}
	_, err = w.Write(out)
	return err
}
