package persistence_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// configQueuer is the part of both stores QueueConfig belongs to.
type configQueuer interface {
	persistence.Store
	QueueConfig(key string, value []byte) (*persistence.ConfigWrite, error)
}

// QueueConfig, on both stores: a value queued behind an append is committed with it or
// after it, never before; it is not visible until committed; a nil value removes the key;
// while commits fail it stays queued (Wait waits) and is written once they succeed again;
// Close gives up on it with ErrClosed when commits keep failing.
func TestQueueConfig(t *testing.T) {
	for name, open := range map[string]persistencetest.Factory{"bolt": openBolt, "memory": openMemory} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			faults := &persistencetest.Faults{}
			st := open(t, persistence.Options{CommitHook: faults.Hook, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond}).(configQueuer)
			id := nsID(1)
			if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, nil); err != nil {
				t.Fatal(err)
			}
			for round := range 50 {
				seq, err := st.Append(owner, id, persistencetest.Update(id, uint64(round+1)))
				if err != nil {
					t.Fatal(err)
				}
				w, err := st.QueueConfig("ledger", []byte{byte(round)})
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Wait(ctx); err != nil {
					t.Fatal(err)
				}
				if got := st.Flushed(owner, id); got < seq {
					t.Fatalf("round %d: the value queued behind append %d is committed, the append is not (flushed %d)", round, seq, got)
				}
				if v, err := st.Config(ctx, "ledger"); err != nil || len(v) != 1 || v[0] != byte(round) {
					t.Fatalf("round %d: ledger = %v, %v", round, v, err)
				}
			}
			w, err := st.QueueConfig("ledger", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Config(ctx, "ledger"); !errors.Is(err, persistence.ErrNotFound) {
				t.Fatalf("after a nil value: %v, want ErrNotFound", err)
			}

			// Failing commits: queued, not visible, written once they succeed.
			faults.Fail(true)
			w, err = st.QueueConfig("ledger", []byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
			if err := w.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait while commits fail: %v", err)
			}
			cancelShort()
			if _, err := st.Config(ctx, "ledger"); !errors.Is(err, persistence.ErrNotFound) {
				t.Fatalf("an uncommitted value is visible: %v", err)
			}
			faults.Fail(false)
			if err := w.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if v, err := st.Config(ctx, "ledger"); err != nil || string(v) != "x" {
				t.Fatalf("ledger = %q, %v", v, err)
			}

			faults.Fail(true)
			w, err = st.QueueConfig("ledger", []byte("y"))
			if err != nil {
				t.Fatal(err)
			}
			closeCtx, cancelClose := context.WithTimeout(ctx, 100*time.Millisecond)
			st.Close(closeCtx)
			cancelClose()
			if err := w.Wait(ctx); !errors.Is(err, persistence.ErrClosed) {
				t.Fatalf("Wait after Close gave up: %v", err)
			}
			if _, err := st.QueueConfig("ledger", []byte("z")); !errors.Is(err, persistence.ErrClosed) {
				t.Fatalf("QueueConfig after Close: %v", err)
			}
		})
	}
}

func TestQueueConfigReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), persistence.FileName)
	populate(t, path)
	st, err := persistence.OpenBolt(path, persistence.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	if _, err := st.QueueConfig("k", []byte("v")); !errors.Is(err, persistence.ErrReadOnly) {
		t.Fatalf("QueueConfig on a read-only store: %v", err)
	}
}
