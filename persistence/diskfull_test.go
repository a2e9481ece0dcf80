package persistence_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit/smallfs"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// healthLog collects OnHealthChange calls.
type healthLog chan error

func (h healthLog) on(healthy bool, err error) {
	if healthy {
		err = nil
	} else if err == nil {
		err = errors.New("unhealthy without an error")
	}
	select {
	case h <- err:
	default:
	}
}

func (h healthLog) want(t *testing.T, healthy bool) error {
	t.Helper()
	select {
	case err := <-h:
		if (err == nil) != healthy {
			t.Fatalf("health change %v, want healthy=%v", err, healthy)
		}
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("no health change to healthy=%v", healthy)
	}
	return nil
}

// A store on a filesystem that fills up: appends queue while their commit fails for lack of
// space, the store reports itself unhealthy with a NoSpaceError naming the file, a write of
// the calling goroutine fails with ErrNoSpace; once space is given back the queued appends
// are committed by themselves, in order, and the store is healthy again — nothing that was
// appended is lost, and the file checks clean.
func TestBoltDiskFull(t *testing.T) {
	fs := smallfs.Mount(t, 8<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	health := make(healthLog, 16)
	path := filepath.Join(fs, "data", persistence.FileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := persistence.OpenBolt(path, persistence.Options{OnHealthChange: health.on,
		RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	id := nsID(1)
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, []byte("s;")); err != nil {
		t.Fatal(err)
	}
	filler := smallfs.Fill(t, fs)

	// Appends of 32 KiB each: the file must grow, and cannot.
	update := func(i int) []byte {
		return append(bytes.Repeat([]byte{'u'}, 32<<10), persistencetest.Update(id, uint64(i))...)
	}
	var seq uint64
	for i := 1; i <= 20; i++ {
		if seq, err = st.Append(owner, id, update(i)); err != nil {
			t.Fatal(err)
		}
	}
	cause := health.want(t, false)
	var nse *persistence.NoSpaceError
	if !errors.As(cause, &nse) || nse.Path != path || !errors.Is(cause, persistence.ErrNoSpace) {
		t.Fatalf("the health change's error %v is not a NoSpaceError naming %s", cause, path)
	}
	if st.Healthy() {
		t.Fatal("Healthy() with a failing commit")
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := st.WaitFlushed(short, owner, id, seq); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFlushed on a full disk: %v", err)
	}
	cancelShort()
	if err := st.PutConfig(ctx, "big", make([]byte, 1<<20)); !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("PutConfig on a full disk: %v, want ErrNoSpace", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := st.WaitFlushed(ctx, owner, id, seq); err != nil {
		t.Fatalf("the queued appends after space came back: %v", err)
	}
	health.want(t, true)
	if !st.Healthy() {
		t.Fatal("not healthy after the queued appends committed")
	}
	closeStore(t, st)
	checkFile(t, path)
	st, err = persistence.OpenBolt(path, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, st)
	doc, err := st.Load(ctx, owner, id)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Through != 20 || len(doc.Updates) != 20 {
		t.Fatalf("after the full disk: through %d, %d updates; want all 20", doc.Through, len(doc.Updates))
	}
	for i, u := range doc.Updates {
		if !bytes.Equal(u, update(i+1)) {
			t.Fatalf("update %d differs", i+1)
		}
	}
}

// A write of the calling goroutine that fails for lack of space, with nothing queued, makes
// the store unhealthy too; the committer probes it and it turns healthy by itself once space
// is given back.
func TestBoltDiskFullDirectWriteRecovers(t *testing.T) {
	fs := smallfs.Mount(t, 4<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	health := make(healthLog, 16)
	st, err := persistence.OpenBolt(filepath.Join(fs, persistence.FileName), persistence.Options{OnHealthChange: health.on,
		RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, st)
	filler := smallfs.Fill(t, fs)
	err = st.CreateEntry(ctx, persistence.Entry{NamespaceID: nsID(1), Owner: owner}, make([]byte, 1<<20))
	if !errors.Is(err, persistence.ErrNoSpace) {
		t.Fatalf("CreateEntry on a full disk: %v, want ErrNoSpace", err)
	}
	health.want(t, false)
	if _, err := st.Entry(ctx, nsID(1)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the failed CreateEntry left an entry: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // probes fail meanwhile
	if st.Healthy() {
		t.Fatal("healthy again while the disk is still full")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	health.want(t, true)
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: nsID(1), Owner: owner}, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
}
