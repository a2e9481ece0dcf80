package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
)

// A store a large namespace was deleted from: `nmcr store compact --out` writes a copy that
// lists the same (nmcr store ls) and is smaller by at least the deleted document, leaving
// the store as it was; --in-place needs --yes, then puts such a copy in the store's place,
// which opens and serves its documents; a store in use is refused and nothing is written.
func TestStoreCompact(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := persistence.OpenDataDir(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for ns, snap := range map[string][]byte{"ns-keep": []byte("KEEP"), "ns-gone": big} {
		if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: ns, Owner: "default", CreatedAt: at}, snap); err != nil {
			t.Fatal(err)
		}
		st.Release("default", ns)
	}
	if err := st.DeleteEntry(ctx, "default", "ns-gone"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, persistence.FileName)
	size := func(p string) int64 {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	ls := func(p string) string {
		t.Helper()
		code, out, errOut := runCmd(t, "store", "ls", p)
		if code != 0 {
			t.Fatalf("nmcr store ls %s: %d %s", p, code, errOut)
		}
		return out
	}
	original, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}
	listed := ls(dir)
	if !strings.Contains(listed, `"ns-keep"`) {
		t.Fatalf("the store lists %s", listed)
	}
	unchanged := func(what string) {
		t.Helper()
		if b, err := os.ReadFile(store); err != nil || !bytes.Equal(b, original) {
			t.Fatalf("%s changed the store (%v)", what, err)
		}
	}

	// Mistakes change nothing.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{dir}, "give --out FILE for a compacted copy, or --in-place --yes"},
		{[]string{dir, "--in-place"}, "confirm with --yes"},
		{[]string{dir, "--in-place", "--yes", "--out", filepath.Join(t.TempDir(), "x.db")}, "not both"},
		{[]string{"--out", "x.db"}, "the store's PATH is required"},
	} {
		code, out, errOut := runCmd(t, append([]string{"store", "compact"}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %d %q %q, want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	unchanged("a mistake")

	// A store in use is refused.
	copyPath := filepath.Join(t.TempDir(), "compacted.db")
	running, err := persistence.OpenDataDir(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{dir, "--out", copyPath}, {dir, "--in-place", "--yes"}} {
		code, _, errOut := runCmd(t, append([]string{"store", "compact"}, args...)...)
		if code != 1 || !strings.Contains(errOut, "in use by a running hub or peer") {
			t.Errorf("%v on a store in use: %d %q", args, code, errOut)
		}
	}
	if err := running.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copyPath); !os.IsNotExist(err) {
		t.Fatalf("a refused compaction left %s (%v)", copyPath, err)
	}
	unchanged("a refused compaction")

	// --out: a smaller copy that lists the same; the store is left as it was.
	code, out, errOut := runCmd(t, "store", "compact", dir, "--out", copyPath)
	if code != 0 || !strings.Contains(out, "given back") {
		t.Fatalf("compact --out: %d %q %q", code, out, errOut)
	}
	unchanged("compact --out")
	if before, after := size(store), size(copyPath); before-after < int64(len(big)) {
		t.Fatalf("the copy has %d bytes, the store %d: less than the deleted %d-byte document given back", after, before, len(big))
	}
	if got := ls(copyPath); got != listed {
		t.Fatalf("the copy lists\n%s\nthe store\n%s", got, listed)
	}
	if code, _, errOut := runCmd(t, "store", "compact", dir, "--out", copyPath); code != 1 || !strings.Contains(errOut, "exists") {
		t.Fatalf("compact --out onto an existing file: %d %q", code, errOut)
	}

	// --in-place --yes: the store is replaced by such a copy.
	before := size(store)
	code, out, errOut = runCmd(t, "store", "compact", dir, "--in-place", "--yes")
	if code != 0 || !strings.Contains(out, "given back") {
		t.Fatalf("compact --in-place: %d %q %q", code, out, errOut)
	}
	if after := size(store); before-after < int64(len(big)) {
		t.Fatalf("in place: %d → %d bytes", before, after)
	}
	if got := ls(dir); got != listed {
		t.Fatalf("after compacting in place the store lists\n%s\nbefore\n%s", got, listed)
	}
	if _, err := os.Stat(store + ".compacting"); !os.IsNotExist(err) {
		t.Fatalf("the copy's temporary file stayed: %v", err)
	}
	st, err = persistence.OpenDataDir(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	if doc, err := st.Load(ctx, "default", "ns-keep"); err != nil || string(doc.Snapshot) != "KEEP" {
		t.Fatalf("the compacted store's document: %q %v", doc.Snapshot, err)
	}
	st.Release("default", "ns-keep")
	if e, err := st.Entry(ctx, "ns-gone"); err != nil || e.State != persistence.StateDeleted {
		t.Fatalf("the tombstone after compacting: %+v %v", e, err)
	}
}
