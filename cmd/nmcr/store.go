package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/persistence"
)

// storeCommands is `nmcr store ls|export|check|compact`: an offline look into a bbolt store
// (docs/operations.md#data-layout-and-backups), and its compaction.
var storeCommands = cli.Group{
	Path: "nmcr store",
	About: "Looks into the store of a stopped hub or peer (its DATA/nomicore.db), read-only, or compacts it. A " +
		"running hub or peer holds its store locked: read from it through its admin API instead.",
	Commands: []cli.Command{
		{Name: "ls", Summary: "one JSON line per namespace entry, per document without an entry, and per archive",
			Run: func(args []string, io cli.IO) int { return runStore("ls", args, io) }},
		{Name: "export", Summary: "a namespace's document (or an archive of it) as hex lines, for nmcr doc",
			Run: func(args []string, io cli.IO) int { return runStore("export", args, io) }},
		{Name: "check", Summary: "rebuild every document and say whether an older version may have damaged it",
			Run: func(args []string, io cli.IO) int { return runStore("check", args, io) }},
		{Name: "compact", Summary: "give the disk space of deleted namespaces back: a copy of the store without its free pages",
			Run: runStoreCompact},
	},
}

const storePathAbout = `PATH is a store file or an instance's data directory (holding nomicore.db). The store is ` +
	`opened read-only; the store of a running hub or peer is locked and refused: read a namespace from its ` +
	`admin API instead (curl -s http://127.0.0.1:8788/v1/namespaces/NAMESPACE/update | nmcr doc json).`

const storeAbout = storePathAbout + ` Exit status: 0 done, 1 the store could not be read, 2 bad usage.`

// runStore runs `nmcr store SUB`.
func runStore(sub string, args []string, cio cli.IO) int {
	synopsis := "nmcr store ls PATH"
	about := "Prints one JSON line per namespace entry (with the size of its document), per document that has no " +
		"entry, and per archive (a reset or archived replica). " + storeAbout
	switch sub {
	case "export":
		synopsis = "nmcr store export PATH NAMESPACE [--archive N] [--owner OWNER]"
		about = "Prints a namespace's document as lines of hex: its snapshot, then each logged update in order (an " +
			"empty document is the one line 0000) — input for nmcr doc json and the other doc commands. " + storeAbout
	case "check":
		synopsis = "nmcr store check PATH [NAMESPACE] [--archives] [--json]"
		about = checkAbout + " " + storePathAbout + " Exit status: 0 every document is ok, 3 some need attention " +
			"(unverified or reset), 1 the store is damaged, one does not load or loads two ways that disagree, or the " +
			"store could not be read, 2 bad usage."
	}
	f := cli.NewFlags("nmcr store "+sub, synopsis, about)
	var archive *uint64
	var owner *string
	var archives, asJSON *bool
	switch sub {
	case "export":
		archive = f.Uint64("archive", 0, "export archive `N` of the namespace (see nmcr store ls) instead of its live document")
		owner = f.String("owner", "", "the `OWNER` of a document that has no entry")
	case "check":
		archives = f.Bool("archives", false, "check the archived documents too (with NAMESPACE, its archives are always checked)")
		asJSON = f.Bool("json", false, "one JSON line per document instead of the report for people")
	}
	pos, code, ok := f.Parse(args, cio)
	if !ok {
		return code
	}
	want := map[string]int{"ls": 1, "export": 2, "check": 2}[sub]
	switch {
	case len(pos) == 0:
		return f.Mistake(cio, "the store's PATH is required")
	case len(pos) < want && sub == "export":
		return f.Mistake(cio, "the NAMESPACE to export is required")
	case len(pos) > want:
		return f.Mistake(cio, "unexpected argument %q", pos[want])
	}
	stdout, stderr := cio.Stdout, cio.Stderr

	st, err := openStoreReadOnly(pos[0])
	if errors.Is(err, persistence.ErrLocked) {
		ns := "<NAMESPACE>"
		if len(pos) > 1 {
			ns = pos[1]
		}
		fmt.Fprintf(stderr, "nmcr store %s: %s is in use by a running hub or peer, which keeps it locked; stop it first, or read a namespace through its admin API: curl -s http://<its --admin-listen>/v1/namespaces/%s/update | nmcr doc json\n", sub, pos[0], ns)
		return 1
	}
	if err != nil && sub == "check" && errors.Is(err, persistence.ErrCorrupt) {
		// Damaged past opening: the file as a whole.
		path := pos[0]
		var ce *persistence.CorruptError
		if errors.As(err, &ce) {
			path = ce.Path
		}
		if rerr := reportDamage(stdout, path, err, false, *asJSON); rerr != nil {
			fmt.Fprintf(stderr, "nmcr store %s: %v\n", sub, rerr)
		}
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "nmcr store %s: %v\n", sub, err)
		return 1
	}
	defer st.Close(context.Background())
	ctx := context.Background()
	status := 0
	switch sub {
	case "ls":
		err = storeList(ctx, st, stdout)
	case "export":
		err = storeExport(ctx, st, pos[0], pos[1], *archive, *owner, stdout)
	case "check":
		ns := ""
		if len(pos) > 1 {
			ns = pos[1]
		}
		if damage := st.Verify(ctx); damage != nil {
			status, err = checkDamaged(ctx, st, pos[0], ns, damage, *asJSON, stdout)
		} else {
			status, err = storeCheck(ctx, st, pos[0], ns, *archives, *asJSON, stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "nmcr store %s: %v\n", sub, err)
		return 1
	}
	return status
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
func storeExport(ctx context.Context, st *persistence.BoltStore, path, ns string, archive uint64, owner string, w io.Writer) error {
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
			return fmt.Errorf("no archive %d of %s (nmcr store ls %s lists the archives)", archive, ns, cli.ShellArg(path))
		}
		return fmt.Errorf("no document %s of owner %s (archived or reset? nmcr store ls %s lists what the store holds)", ns, owner, cli.ShellArg(path))
	}
	if err != nil {
		return err
	}
	var out []byte
	if len(doc.Snapshot) == 0 && len(doc.Updates) == 0 {
		out = append(out, "0000\n"...) // an empty document, as an update
	}
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
