package persistence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

func fakeClock() *clock.Fake { return clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// TestGroupCommitDelayAndBatch: appends to an idle queue wait CommitDelay (on the injected
// clock) and then commit in one transaction; a full batch commits at once.
func TestGroupCommitDelayAndBatch(t *testing.T) {
	clk := fakeClock()
	st := openMemory(t, persistence.Options{Clock: clk, CommitDelay: 10 * time.Millisecond, MaxBatch: 8})
	ctx := context.Background()
	id := nsID(1)
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, nil); err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s <= 3; s++ {
		if _, err := st.Append(owner, id, persistencetest.Update(id, s)); err != nil {
			t.Fatal(err)
		}
	}
	if !clk.WaitForTimers(1, 10*time.Second) {
		t.Fatal("the committer armed no commit-delay timer")
	}
	// Nothing commits before the delay passes: the committer waits on the fake clock.
	if got := st.Flushed(owner, id); got != 0 {
		t.Fatalf("Flushed = %d before the commit delay passed", got)
	}
	clk.Advance(9 * time.Millisecond)
	if got := st.Flushed(owner, id); got != 0 {
		t.Fatalf("Flushed = %d before the commit delay passed", got)
	}
	clk.Advance(time.Millisecond)
	if err := st.WaitFlushed(ctx, owner, id, 3); err != nil {
		t.Fatal(err)
	}
	if c := st.Stats().Commits; c != 1 {
		t.Fatalf("%d commits for 3 appends inside one delay, want 1", c)
	}

	// A full batch does not wait for the clock.
	for s := uint64(4); s <= 11; s++ {
		if _, err := st.Append(owner, id, persistencetest.Update(id, s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.WaitFlushed(ctx, owner, id, 11); err != nil {
		t.Fatal(err)
	}
	if c := st.Stats().Commits; c != 2 {
		t.Fatalf("%d commits after a full batch, want 2", c)
	}
}

// TestGroupCommitUnawaited: while nothing waits for the queue to commit, a group waits
// UnawaitedCommitDelay; something starting to wait (WaitFlushed) cuts the wait to
// CommitDelay, counted from the group's start.
func TestGroupCommitUnawaited(t *testing.T) {
	clk := fakeClock()
	st := openMemory(t, persistence.Options{Clock: clk, CommitDelay: 2 * time.Millisecond, UnawaitedCommitDelay: 20 * time.Millisecond})
	ctx := context.Background()
	id := nsID(1)
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, nil); err != nil {
		t.Fatal(err)
	}
	appendOne := func(seq uint64) {
		t.Helper()
		if _, err := st.Append(owner, id, persistencetest.Update(id, seq)); err != nil {
			t.Fatal(err)
		}
		if !clk.WaitForTimers(1, 10*time.Second) {
			t.Fatal("the committer armed no commit-delay timer")
		}
	}

	// Nothing waits: past CommitDelay the group still waits (its timer is still pending:
	// one of 2 ms would have fired inside Advance), and it commits at 20 ms.
	appendOne(1)
	clk.Advance(2 * time.Millisecond)
	if n, got := clk.Pending(), st.Flushed(owner, id); n != 1 || got != 0 {
		t.Fatalf("2 ms into an unawaited group: %d timers pending, Flushed = %d; want the group still waiting", n, got)
	}
	clk.Advance(18 * time.Millisecond)
	if err := st.WaitFlushed(ctx, owner, id, 1); err != nil {
		t.Fatal(err)
	}
	if c := st.Stats().Commits; c != 1 {
		t.Fatalf("%d commits, want 1", c)
	}

	// A waiter arrives at once: the group commits at 2 ms, long before 20.
	appendOne(2)
	done := make(chan error, 1)
	go func() { done <- st.WaitFlushed(ctx, owner, id, 2) }()
	for waited := time.Duration(0); ; waited += time.Millisecond {
		if waited >= 19*time.Millisecond {
			t.Fatal("a waiter did not shorten the group's wait to CommitDelay")
		}
		clk.Advance(time.Millisecond)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(200 * time.Millisecond):
			continue
		}
		break
	}
	if c := st.Stats().Commits; c != 2 {
		t.Fatalf("%d commits, want 2", c)
	}
}

// TestRetryBackoff: after a failed commit the committer retries after RetryMin, doubling up
// to RetryMax, on the injected clock; the appends stay queued and commit once it succeeds.
func TestRetryBackoff(t *testing.T) {
	clk := fakeClock()
	attempts := make(chan struct{}, 100)
	var faults persistencetest.Faults
	st := openMemory(t, persistence.Options{
		Clock: clk, CommitDelay: -1, RetryMin: 10 * time.Millisecond, RetryMax: 40 * time.Millisecond,
		CommitHook: func() error {
			err := faults.Hook() // decided before the test hears of the attempt
			attempts <- struct{}{}
			return err
		},
	})
	ctx := context.Background()
	id := nsID(1)
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, nil); err != nil {
		t.Fatal(err)
	}
	faults.Fail(true)
	if _, err := st.Append(owner, id, []byte("u;")); err != nil {
		t.Fatal(err)
	}
	attempt := func() {
		t.Helper()
		select {
		case <-attempts:
		case <-time.After(10 * time.Second):
			t.Fatal("no commit attempt")
		}
	}
	noAttempt := func() {
		t.Helper()
		if !clk.WaitForTimers(1, 10*time.Second) {
			t.Fatal("the committer armed no retry timer")
		}
		select {
		case <-attempts:
			t.Fatal("a commit attempt before its backoff passed")
		default:
		}
	}
	attempt() // the first, failing
	for _, wait := range []time.Duration{10, 20, 40, 40} {
		noAttempt()
		clk.Advance(wait*time.Millisecond - time.Millisecond)
		noAttempt()
		clk.Advance(time.Millisecond)
		attempt()
	}
	faults.Fail(false)
	noAttempt()
	clk.Advance(40 * time.Millisecond)
	attempt()
	if err := st.WaitFlushed(ctx, owner, id, 1); err != nil {
		t.Fatal(err)
	}
	if !st.Healthy() {
		t.Fatal("not healthy after a successful commit")
	}
}

func TestOptionsValidated(t *testing.T) {
	for _, o := range []persistence.Options{
		{MaxBatch: -1}, {MaxQueuedAppends: -1}, {MaxQueuedBytes: -1},
		{RetryMin: -time.Second}, {RetryMin: time.Second, RetryMax: time.Millisecond}, {LockTimeout: -1},
	} {
		if _, err := persistence.NewMemoryStore(o); !errors.Is(err, persistence.ErrInvalid) {
			t.Fatalf("NewMemoryStore(%+v) = %v, want ErrInvalid", o, err)
		}
		if _, err := persistence.OpenBolt(t.TempDir()+"/x.db", o); !errors.Is(err, persistence.ErrInvalid) {
			t.Fatalf("OpenBolt(%+v) = %v, want ErrInvalid", o, err)
		}
	}
}

// TestPanickingCallbacksAreIgnored: a callback that panics does not stop the committer.
func TestPanickingCallbacksAreIgnored(t *testing.T) {
	st := openMemory(t, persistence.Options{
		OnFlushed:      func(string, string, uint64) { panic("observer bug") },
		OnHealthChange: func(bool, error) { panic("observer bug") },
	})
	ctx := context.Background()
	id := nsID(1)
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, nil); err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s <= 3; s++ {
		if _, err := st.Append(owner, id, persistencetest.Update(id, s)); err != nil {
			t.Fatal(err)
		}
		if err := st.WaitFlushed(ctx, owner, id, s); err != nil {
			t.Fatal(err)
		}
	}
}
