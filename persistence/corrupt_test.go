package persistence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// wantCorrupt fails unless err is a *CorruptError naming path.
func wantCorrupt(t *testing.T, err error, path string) *persistence.CorruptError {
	t.Helper()
	var ce *persistence.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, persistence.ErrCorrupt) || ce.Path != path || !strings.Contains(err.Error(), path) {
		t.Fatalf("error = %v, want a CorruptError naming %s", err, path)
	}
	return ce
}

// readEverything opens the store at path and reads and writes through every part of it. It
// returns the errors met (the caller checks that they are clear ones) and the documents of
// owner that read back.
func readEverything(path string) (docsRead map[string][]byte, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := persistence.OpenBolt(path, persistence.Options{LockTimeout: 100 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: time.Millisecond})
	if err != nil {
		return nil, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if cerr := st.Close(closeCtx); err == nil {
			err = cerr
		}
	}()
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	_, err = st.Entries(ctx, "")
	note(err)
	docs, err := st.Docs(ctx)
	note(err)
	docsRead = map[string][]byte{}
	for _, d := range docs {
		doc, err := st.Load(ctx, d.Owner, d.NamespaceID)
		note(err)
		if err == nil && d.Owner == owner {
			docsRead[d.NamespaceID] = persistencetest.Flatten(doc)
		}
	}
	archives, err := st.Archives(ctx, "")
	note(err)
	for _, a := range archives {
		_, err := st.LoadArchive(ctx, a.NamespaceID, a.ID)
		note(err)
	}
	keys, err := st.ConfigKeys(ctx, "")
	note(err)
	for _, k := range keys {
		_, err := st.Config(ctx, k)
		note(err)
	}
	note(st.Verify(ctx))
	// The write path too: a new entry, and an append to a loaded document.
	note(st.CreateEntry(ctx, persistence.Entry{NamespaceID: nsID(99), Owner: owner}, []byte("new")))
	if seq, err := st.Append(owner, nsID(99), []byte("u")); err == nil {
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		if werr := st.WaitFlushed(wctx, owner, nsID(99), seq); werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
			note(werr)
		}
		cancel()
	}
	return docsRead, errors.Join(errs...)
}

// checkReads fails if a document read back from a damaged copy differs from want, or if one
// is missing although reading met no error (readErr): the right data or a clear error.
func checkReads(t *testing.T, what string, docs, want map[string][]byte, readErr error) {
	t.Helper()
	for id, got := range docs {
		if w := want[id]; !bytes.Equal(got, w) {
			t.Fatalf("%s: %s reads %q, want %q", what, id, got, w)
		}
	}
	if readErr == nil && len(docs) != len(want) {
		t.Fatalf("%s: read without error, but %d of %d documents", what, len(docs), len(want))
	}
}

func TestBoltCorruptGarbageFile(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{10, 4096, 64 << 10} {
		path := filepath.Join(dir, "garbage.db")
		garbage := make([]byte, size)
		for i := range garbage {
			garbage[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(path, garbage, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := readEverything(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("%d bytes of garbage: %v, want an error naming the file", size, err)
		}
	}
	// A bbolt file that is not a Nomicore store.
	path := filepath.Join(dir, "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("something")); return err })
	db.Close()
	_, err = persistence.OpenBolt(path, persistence.Options{})
	if ce := wantCorrupt(t, err, path); !strings.Contains(ce.Reason, "not a Nomicore store") {
		t.Fatalf("reason %q", ce.Reason)
	}
}

func TestBoltCorruptTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	pristine := filepath.Join(dir, "pristine.db")
	want := populate(t, pristine)
	data, err := os.ReadFile(pristine)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{100, 4096, 3 * 4096, len(data) / 2, len(data) - 4096, len(data) - 1} {
		path := filepath.Join(dir, "truncated.db")
		if err := os.WriteFile(path, data[:size], 0o600); err != nil {
			t.Fatal(err)
		}
		docs, err := readEverything(path)
		t.Logf("truncated to %d of %d bytes: %v", size, len(data), err)
		checkReads(t, fmt.Sprintf("truncated to %d bytes", size), docs, want, err)
		if err == nil {
			continue // only free pages were cut off
		}
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("truncated to %d bytes: %v, want an error naming the file", size, err)
		}
	}
}

// flipIn flips one bit inside the only occurrence of needle in the file at path.
func flipIn(t *testing.T, path string, needle []byte) {
	t.Helper()
	if err := persistencetest.FlipIn(path, needle); err != nil {
		t.Fatal(err)
	}
}

func TestBoltCorruptFlippedValue(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		needle []byte
		read   func(st *persistence.BoltStore) error
		where  string
	}{
		{"update", persistencetest.Update(nsID(0), 17), func(st *persistence.BoltStore) error {
			_, err := st.Load(ctx, owner, nsID(0))
			return err
		}, "docs/default/" + nsID(0) + "/log/17"},
		{"snapshot", []byte("snapshot of " + nsID(2)), func(st *persistence.BoltStore) error {
			_, err := st.Load(ctx, owner, nsID(2))
			return err
		}, "docs/default/" + nsID(2) + "/snapshot"},
		{"archived update", persistencetest.Update(nsID(3), 5), func(st *persistence.BoltStore) error {
			_, err := st.LoadArchive(ctx, nsID(3), 1)
			return err
		}, "archives/" + nsID(3) + "/1/log/5"},
		{"config", []byte(`["a","b"]`), func(st *persistence.BoltStore) error {
			_, err := st.Config(ctx, "targets")
			return err
		}, "config/targets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), persistence.FileName)
			want := populate(t, path)
			flipIn(t, path, c.needle)
			st, err := persistence.OpenBolt(path, persistence.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore(t, st)
			ce := wantCorrupt(t, c.read(st), path)
			if ce.Where != c.where || !strings.Contains(ce.Reason, "checksum") {
				t.Fatalf("CorruptError at %q (%s), want at %q: checksum", ce.Where, ce.Reason, c.where)
			}
			wantCorrupt(t, st.Verify(ctx), path)
			// The rest of the store still reads.
			doc, err := st.Load(ctx, owner, nsID(1))
			if err != nil || !bytes.Equal(persistencetest.Flatten(doc), want[nsID(1)]) {
				t.Fatalf("an undamaged document: %v", err)
			}
		})
	}
}

func TestBoltCorruptLogGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), persistence.FileName)
	populate(t, path)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		lb := tx.Bucket([]byte("docs")).Bucket([]byte(owner)).Bucket([]byte(nsID(0))).Bucket([]byte("log"))
		return lb.Delete([]byte{0, 0, 0, 0, 0, 0, 0, 20})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err := persistence.OpenBolt(path, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, st)
	_, err = st.Load(context.Background(), owner, nsID(0))
	if ce := wantCorrupt(t, err, path); !strings.Contains(ce.Reason, "gap") {
		t.Fatalf("reason %q", ce.Reason)
	}
}

// TestBoltCorruptRandomFlips damages a store at random places, many times over (seeded):
// opening, reading and writing must give either the right data or an error naming the file,
// and never a panic or a crash.
func TestBoltCorruptRandomFlips(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIPPED under -race: checkptr (which -race turns on) makes bbolt's unsafe reads of a damaged page " +
			"a fatal error rather than a recoverable panic; run without -race: go test -run Corrupt ./persistence")
	}
	dir := t.TempDir()
	pristine := filepath.Join(dir, "pristine.db")
	want := populate(t, pristine)
	data, err := os.ReadFile(pristine)
	if err != nil {
		t.Fatal(err)
	}
	rounds := 150
	switch {
	case *long:
		rounds = 3000
	case testing.Short():
		rounds = 30
	}
	rng := rand.New(rand.NewPCG(42, 7))
	outcomes := map[string]int{}
	for round := range rounds {
		damaged := bytes.Clone(data)
		for range 1 + rng.IntN(3) {
			damaged[rng.IntN(len(damaged))] ^= byte(1 + rng.IntN(255))
		}
		path := filepath.Join(dir, "damaged.db")
		if err := os.WriteFile(path, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		docs, err := readEverything(path)
		checkReads(t, fmt.Sprintf("round %d", round), docs, want, err)
		switch {
		case err == nil:
			outcomes["read fine"]++
		case strings.Contains(err.Error(), path):
			outcomes["error naming the file"]++
		default:
			t.Fatalf("round %d: %.500v, want an error naming %s", round, err, path)
		}
	}
	t.Logf("%d damaged copies: %v", rounds, outcomes)
}
