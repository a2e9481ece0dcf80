package persistence_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// gatedWriter lets the first write through only once gate is closed.
type gatedWriter struct {
	gate    chan struct{}
	started chan struct{}
	buf     bytes.Buffer
	first   bool
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	if !g.first {
		g.first = true
		close(g.started)
		<-g.gate
	}
	return g.buf.Write(p)
}

// A backup of a running store is the store as one transaction saw it: while the copy is held
// up, appends keep committing (20 MiB of them, on a store of a few pages); the copy opens as a store of its own, checks clean, and holds
// every document as it was when the copy began — not the appends made during it.
func TestBoltBackupWhileWriting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	path := filepath.Join(dir, persistence.FileName)
	want := populate(t, path)
	st := openBoltAt(t, path, persistence.Options{})
	id := nsID(0)
	if _, err := st.Load(ctx, owner, id); err != nil {
		t.Fatal(err)
	}
	g := &gatedWriter{gate: make(chan struct{}), started: make(chan struct{})}
	var size int64
	done := make(chan error, 1)
	var n int64
	go func() {
		var err error
		n, err = st.Backup(ctx, func(s int64) (io.Writer, error) { size = s; return g, nil })
		done <- err
	}()
	<-g.started
	// The copy is held up; writes go on, each durable, growing the file well past what
	// bbolt would have mapped for it (a commit needing a larger mapping would wait for the
	// copy).
	for s := uint64(41); s <= 60; s++ {
		seq, err := st.Append(owner, id, append(persistencetest.Update(id, s), make([]byte, 1<<20)...))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := st.WaitFlushed(wctx, owner, id, seq); err != nil {
			t.Fatalf("an append during the backup: %v", err)
		}
		cancel()
	}
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n != size || int64(g.buf.Len()) != size {
		t.Fatalf("backup wrote %d bytes (%d buffered), announced %d", n, g.buf.Len(), size)
	}

	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, g.buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, copyPath)
	cp, err := persistence.OpenBolt(copyPath, persistence.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close(ctx)
	for ns, w := range want {
		doc, err := cp.Load(ctx, owner, ns)
		if err != nil {
			t.Fatal(err)
		}
		if got := persistencetest.Flatten(doc); !bytes.Equal(got, w) {
			t.Fatalf("%s in the copy: %q, want %q (as when the copy began)", ns, got, w)
		}
	}
}

// A backup ends when its context does, with the context's error.
func TestBoltBackupCanceled(t *testing.T) {
	path := filepath.Join(t.TempDir(), persistence.FileName)
	populate(t, path)
	st := openBoltAt(t, path, persistence.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	_, err := st.Backup(ctx, func(int64) (io.Writer, error) { cancel(); return io.Discard, nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a canceled backup: %v", err)
	}
}
