package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/backup"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
)

const testNS = "ns-0123456789abcdef0123456789abcdef"

// A peer's store with a target, a replica written to, and a count of unreplicated bytes.
func peerStore(t *testing.T, dir string) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	in, err := OpenInstance(dir, registry.RolePeer, observer.SidePeer, clock.Real(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx := context.Background()
	if err := RememberTarget(ctx, in.Store, namespace.Target{NamespaceID: testNS, Owner: "default"}); err != nil {
		t.Fatal(err)
	}
	l := NewDurableLedger(in.Store, log)
	l.Record(testNS, 4321)
	if err := l.Wait(ctx, testNS); err != nil {
		t.Fatal(err)
	}
}

// The durable ledger: what it records is read back after a restart; the counts of
// namespaces that are no longer targets are dropped; a count of zero removes the key.
func TestDurableLedger(t *testing.T) {
	dir := t.TempDir()
	peerStore(t, dir)
	st, err := OpenStore(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	ctx := context.Background()
	got, err := LoadLedger(ctx, st, []string{testNS})
	if err != nil || got[testNS] != 4321 || len(got) != 1 {
		t.Fatalf("LoadLedger = %v, %v", got, err)
	}
	l := NewDurableLedger(st, slog.New(slog.DiscardHandler))
	l.Record(testNS, 0)
	if err := l.Wait(ctx, testNS); err != nil {
		t.Fatal(err)
	}
	if keys, _ := st.ConfigKeys(ctx, ledgerKeyPrefix); len(keys) != 0 {
		t.Fatalf("a zero count left %v", keys)
	}
	l.Record(testNS, 7)
	l.Wait(ctx, testNS)
	if got, err := LoadLedger(ctx, st, nil); err != nil || len(got) != 0 {
		t.Fatalf("the count of a namespace that is no longer a target: %v, %v", got, err)
	}
	if keys, _ := st.ConfigKeys(ctx, ledgerKeyPrefix); len(keys) != 0 {
		t.Fatalf("a stale count was kept: %v", keys)
	}
}

// A damaged store is found at open — a record whose checksum fails, a page bbolt cannot
// read, a file cut short — and refused with a DamagedStoreError naming the file; a store of a
// newer format is not called damaged.
func TestOpenStoreFindsDamage(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cases := map[string]func(path string) error{
		"record": func(path string) error { return persistencetest.FlipIn(path, []byte(`{"bytes":4321}`)) },
		"page":   func(path string) error { return persistencetest.BreakPageOf(path, []byte(`{"bytes":4321}`)) },
		"cut":    func(path string) error { return persistencetest.Truncate(path, 3*persistencetest.PageSize) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			peerStore(t, dir)
			file := filepath.Join(dir, persistence.FileName)
			if err := damage(file); err != nil {
				t.Fatal(err)
			}
			_, err := OpenStore(dir, log)
			var de *DamagedStoreError
			if !errors.As(err, &de) || de.File != file || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "damaged") {
				t.Fatalf("open: %v, want a DamagedStoreError naming %s", err, file)
			}
		})
	}
	dir := t.TempDir()
	peerStore(t, dir)
	if err := persistencetest.SetFormat(filepath.Join(dir, persistence.FileName), persistence.FormatVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err := OpenStore(dir, log)
	var de *DamagedStoreError
	if errors.As(err, &de) || !strings.Contains(err.Error(), "newer version") {
		t.Fatalf("a newer format: %v", err)
	}
}

// RebuildDamagedStore moves the file aside, keeping it, and reads back the targets and the
// ledger where the damage allows.
func TestRebuildDamagedStore(t *testing.T) {
	dir := t.TempDir()
	peerStore(t, dir)
	file := filepath.Join(dir, persistence.FileName)
	if err := persistencetest.FlipIn(file, []byte(`{"bytes":4321}`)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(file)
	var logged bytes.Buffer
	rb, err := RebuildDamagedStore(dir, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if rb.Archived != file+".damaged-20261201T100000Z" {
		t.Fatalf("archived as %s", rb.Archived)
	}
	if after, err := os.ReadFile(rb.Archived); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the moved file differs: %v", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the damaged file is still in place: %v", err)
	}
	if len(rb.Targets) != 1 || rb.Targets[0].NamespaceID != testNS || rb.Lost != nil {
		t.Fatalf("targets read back: %+v, %v", rb.Targets, rb.Lost)
	}
	if !strings.Contains(logged.String(), "nmcr store export "+rb.Archived) {
		t.Fatalf("the log line does not say how to read the moved file: %s", logged.String())
	}
	st, err := OpenStore(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("a new store after the rebuild: %v", err)
	}
	st.Close(context.Background())
}

// Restore: a backup of a single hub becomes a data directory — its store checked, its tokens
// file, a note — or, with Fence, one whose namespaces' epochs are raised; a directory that
// holds a store is refused, and so is a backup of a damaged store.
func TestRestoreHub(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	src := t.TempDir()
	in, err := OpenInstance(src, registry.RoleHub, observer.SideHub, clock.Real(), log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := in.Registry.Create(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	// A namespace deleted before the backup: it stays deleted, and is not fenced.
	gone, err := in.Registry.Create(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Registry.Delete(ctx, "default", gone.NamespaceID, gone.Identity.Epoch); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(src, "tokens.json")
	os.WriteFile(tokens, []byte(`{"peers":[]}`), 0o600)
	var buf bytes.Buffer
	if _, err := HubBackup(in.Store.(*persistence.BoltStore), tokens, "hub", clock.Real())(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	in.Close()
	file := filepath.Join(t.TempDir(), "hub.backup")
	os.WriteFile(file, buf.Bytes(), 0o600)

	for _, fence := range []bool{false, true} {
		data := filepath.Join(t.TempDir(), "restored")
		note, err := Restore(ctx, RestoreOptions{From: file, Data: data, Fence: fence, Clock: clock.Real(), Log: log})
		if err != nil {
			t.Fatal(err)
		}
		if note.Namespaces != 1 || note.Kind != backup.KindHub || note.Fence != fence {
			t.Fatalf("note %+v", note)
		}
		if b, err := os.ReadFile(filepath.Join(data, "tokens.json")); err != nil || string(b) != `{"peers":[]}` {
			t.Fatalf("tokens: %q %v", b, err)
		}
		if got, ok, err := ReadRestored(data); !ok || err != nil || got.BackupCreatedAt.IsZero() {
			t.Fatalf("the note: %+v %v %v", got, ok, err)
		}
		in, err := OpenInstance(data, registry.RoleHub, observer.SideHub, clock.Real(), log)
		if err != nil {
			t.Fatal(err)
		}
		l, err := in.Registry.Open(ctx, "default", c.NamespaceID)
		if err != nil {
			t.Fatal(err)
		}
		want := c.Identity
		if fence {
			want.Epoch++
		}
		if got := l.Identity(); got != want {
			t.Fatalf("fence %v: identity %v, want %v", fence, got, want)
		}
		l.Release()
		if l, err := in.Registry.Open(ctx, "default", gone.NamespaceID); !errors.Is(err, registry.ErrDeleted) {
			if err == nil {
				l.Release()
			}
			t.Fatalf("fence %v: the deleted namespace: %v", fence, err)
		}
		in.Close()
		if _, err := Restore(ctx, RestoreOptions{From: file, Data: data, Clock: clock.Real(), Log: log}); err == nil || !strings.Contains(err.Error(), "already holds") {
			t.Fatalf("a restore over a store: %v", err)
		}
	}

	// A backup whose store was damaged when it was taken (its own checksum is right):
	// refused, and no store is left behind.
	store := storeSection(t, buf.Bytes())
	k := bytes.Index(store, []byte("default")) // in the namespace's entry record
	if k < 0 {
		t.Fatal("no entry record in the store")
	}
	store[k] ^= 0x20
	var bad bytes.Buffer
	w, err := backup.NewWriter(&bad, backup.Header{Kind: backup.KindHub, CreatedAt: time.Now(), InstanceID: "hub"})
	if err != nil {
		t.Fatal(err)
	}
	w.Bytes(backup.KindStore, store)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(t.TempDir(), "bad.backup")
	os.WriteFile(badFile, bad.Bytes(), 0o600)
	data := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(ctx, RestoreOptions{From: badFile, Data: data, Clock: clock.Real(), Log: log}); err == nil ||
		!strings.Contains(err.Error(), "damaged (it was when the backup was taken)") {
		t.Fatalf("a backup of a damaged store: %v", err)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Fatalf("a refused restore left %v", entries)
	}
}

// storeSection returns the store section of a backup.
func storeSection(t *testing.T, b []byte) []byte {
	t.Helper()
	r, err := backup.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for {
		kind, size, body, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if kind == backup.KindStore {
			out := make([]byte, size)
			if _, err := io.ReadFull(body, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
}
