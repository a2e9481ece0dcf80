package persistence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// openBoltAt opens the store at path; its cleanup closes it and checks the file with bbolt's
// own consistency check and with Verify.
func openBoltAt(t *testing.T, path string, opts persistence.Options) *persistence.BoltStore {
	t.Helper()
	st, err := persistence.OpenBolt(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st.Close(ctx)
		checkFile(t, path)
	})
	return st
}

// checkFile runs bbolt's page-level check and our record-level Verify on a closed store.
func checkFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Errorf("reopen %s: %v", path, err)
		return
	}
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Error(err)
	}
	st, err := persistence.OpenBolt(path, persistence.Options{ReadOnly: true})
	if err != nil {
		t.Errorf("open read-only: %v", err)
		return
	}
	defer st.Close(context.Background())
	if err := st.Verify(context.Background()); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func openBolt(t *testing.T, opts persistence.Options) persistence.Store {
	return openBoltAt(t, filepath.Join(t.TempDir(), persistence.FileName), opts)
}

func TestBoltStoreConformance(t *testing.T) {
	persistencetest.Run(t, openBolt)
}

func closeStore(t *testing.T, st persistence.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

const owner = "default"

func nsID(i int) string { return fmt.Sprintf("ns-%032x", i) }

// populate writes a store with entries, documents (snapshot and log), an archive and config,
// closes it, and returns what each document of owner reads back as.
func populate(t *testing.T, path string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	st, err := persistence.OpenBolt(path, persistence.Options{Compactor: persistencetest.Concat, CompactAfterCount: -1, CompactAfterBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for i := range 4 {
		id := nsID(i)
		snap := []byte(fmt.Sprintf("snapshot of %s;", id))
		if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner, CreatedAt: time.Unix(1700000000, int64(i))}, snap); err != nil {
			t.Fatal(err)
		}
		for s := uint64(1); s <= 40; s++ {
			if _, err := st.Append(owner, id, persistencetest.Update(id, s)); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.WaitFlushed(ctx, owner, id, 40); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if err := st.Compact(ctx, owner, id); err != nil {
				t.Fatal(err)
			}
			for s := uint64(41); s <= 45; s++ {
				st.Append(owner, id, persistencetest.Update(id, s))
			}
		}
		doc, err := st.Load(ctx, owner, id)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = persistencetest.Flatten(doc)
	}
	if _, err := st.Archive(ctx, owner, nsID(3)); err != nil {
		t.Fatal(err)
	}
	delete(want, nsID(3))
	if err := st.PutConfig(ctx, "targets", []byte(`["a","b"]`)); err != nil {
		t.Fatal(err)
	}
	closeStore(t, st)
	return want
}

func TestBoltReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), persistence.FileName)
	want := populate(t, path)
	st := openBoltAt(t, path, persistence.Options{})
	ctx := context.Background()
	list, err := st.Entries(ctx, owner)
	if err != nil || len(list) != 4 || list[3].State != persistence.StateArchived || !list[2].CreatedAt.Equal(time.Unix(1700000000, 2)) {
		t.Fatalf("Entries = %+v, %v", list, err)
	}
	for id, w := range want {
		doc, err := st.Load(ctx, owner, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := persistencetest.Flatten(doc); !bytes.Equal(got, w) {
			t.Fatalf("%s reads %q after reopening, want %q", id, got, w)
		}
		// Numbering continues after a reopen.
		seq, err := st.Append(owner, id, []byte("next;"))
		if err != nil || seq != doc.Through+1 {
			t.Fatalf("Append after reopen = %d, %v; want %d", seq, err, doc.Through+1)
		}
	}
	if doc, _ := st.Load(ctx, owner, nsID(1)); doc.SnapshotThrough != 40 || len(doc.Updates) != 6 {
		t.Fatalf("compacted doc: snapshot through %d, %d updates", doc.SnapshotThrough, len(doc.Updates))
	}
	archives, err := st.Archives(ctx, "")
	if err != nil || len(archives) != 1 || archives[0].LogUpdates != 40 {
		t.Fatalf("Archives = %+v, %v", archives, err)
	}
	if v, err := st.Config(ctx, "targets"); err != nil || string(v) != `["a","b"]` {
		t.Fatalf("Config = %q, %v", v, err)
	}
}

func TestBoltDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	st, err := persistence.OpenDataDir(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, st)
	for _, ro := range []bool{false, true} {
		_, err := persistence.OpenDataDir(dir, persistence.Options{LockTimeout: 50 * time.Millisecond, ReadOnly: ro})
		if !errors.Is(err, persistence.ErrLocked) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use by another process") {
			t.Fatalf("second open (read-only %v) = %v, want ErrLocked naming %s", ro, err, dir)
		}
	}
}

func TestBoltReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), persistence.FileName)
	want := populate(t, path)
	st, err := persistence.OpenBolt(path, persistence.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, st)
	ctx := context.Background()
	for id, w := range want {
		doc, err := st.Load(ctx, owner, id)
		if err != nil || !bytes.Equal(persistencetest.Flatten(doc), w) {
			t.Fatalf("Load(%s) = %q, %v", id, persistencetest.Flatten(doc), err)
		}
	}
	if st.Stats().Resident != 0 {
		t.Fatal("a read-only Load made the namespace resident")
	}
	if _, err := st.Append(owner, nsID(0), []byte("x")); !errors.Is(err, persistence.ErrReadOnly) {
		t.Fatalf("Append = %v", err)
	}
	if err := st.PutConfig(ctx, "k", nil); !errors.Is(err, persistence.ErrReadOnly) {
		t.Fatalf("PutConfig = %v", err)
	}
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: nsID(9), Owner: owner}, nil); !errors.Is(err, persistence.ErrReadOnly) {
		t.Fatalf("CreateEntry = %v", err)
	}
	if _, err := st.Archive(ctx, owner, nsID(0)); !errors.Is(err, persistence.ErrReadOnly) {
		t.Fatalf("Archive = %v", err)
	}
	docs, err := st.Docs(ctx)
	if err != nil || len(docs) != 3 || docs[1].SnapshotThrough != 40 || docs[0].LogUpdates != 40 {
		t.Fatalf("Docs = %+v, %v", docs, err)
	}
	if _, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "missing.db"), persistence.Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only open of a missing file succeeded")
	}
}

// The snapshot sits alone in a bucket of its own, so that a commit appending to the log
// (which rewrites every bbolt node it touches, the document bucket included) never rewrites
// the snapshot: the bytes written per update do not grow with the document.
func TestBoltSnapshotInItsOwnBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), persistence.FileName)
	st, err := persistence.OpenBolt(path, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := "ns-" + strings.Repeat("ab", 16)
	big := bytes.Repeat([]byte{7}, 256<<10)
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: "default", CreatedAt: time.Unix(0, 0)}, big); err != nil {
		t.Fatal(err)
	}
	closeStore(t, st)

	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		doc := tx.Bucket([]byte("docs")).Bucket([]byte("default")).Bucket([]byte(id))
		var keys []string
		err := doc.ForEach(func(k, v []byte) error {
			if v != nil {
				return fmt.Errorf("document bucket holds a value under %q", k)
			}
			keys = append(keys, string(k))
			return nil
		})
		if err != nil {
			return err
		}
		if strings.Join(keys, ",") != "log,snapshot" {
			return fmt.Errorf("document bucket holds %v, want the buckets log and snapshot", keys)
		}
		if v := doc.Bucket([]byte("snapshot")).Get([]byte("snapshot")); !bytes.Contains(v, big[:1024]) {
			return errors.New("the snapshot record is not in the snapshot bucket")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBoltStoreFeedConformance(t *testing.T) {
	persistencetest.RunFeed(t, openBolt)
}
