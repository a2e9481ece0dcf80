package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/persistence"
)

// snapshotFaults is a store whose appends and snapshots fail as a test sets them.
type snapshotFaults struct {
	persistence.Store
	mu          sync.Mutex // guards the fields below
	appendErrs  []error    // the next appends fail with these, in order
	replaceErrs []error    // the next snapshots fail with these, in order; the last one stays
	replaces    int        // ReplaceSnapshot calls
}

func (s *snapshotFaults) Append(owner, ns string, update []byte) (uint64, error) {
	s.mu.Lock()
	if len(s.appendErrs) > 0 {
		err := s.appendErrs[0]
		s.appendErrs = s.appendErrs[1:]
		s.mu.Unlock()
		return 0, err
	}
	s.mu.Unlock()
	return s.Store.Append(owner, ns, update)
}

func (s *snapshotFaults) ReplaceSnapshot(ctx context.Context, owner, ns string, snap []byte, through uint64) error {
	s.mu.Lock()
	s.replaces++
	var err error
	if len(s.replaceErrs) > 0 {
		err = s.replaceErrs[0]
		if len(s.replaceErrs) > 1 {
			s.replaceErrs = s.replaceErrs[1:]
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Store.ReplaceSnapshot(ctx, owner, ns, snap, through)
}

func (s *snapshotFaults) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replaces
}

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count returns how often s occurs in the log.
func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A snapshot that the store refuses for a reason trying again cannot cure — here a store
// that offers no snapshots — is reported once, with its cause
// (one log line, SaveFailures.Permanent), and not tried again however long the namespace
// stays loaded or how many writes it refuses; those writes are refused as degraded and
// name the cause.
func TestSaver_PermanentFailureIsReportedOnceAndNotRetried(t *testing.T) {
	unsupported := fmt.Errorf("this store keeps no snapshots: %w", persistence.ErrUnsupported)
	st := &snapshotFaults{Store: newMemStore(t, persistence.Options{}),
		appendErrs: []error{fmt.Errorf("this store takes no appends: %w", persistence.ErrUnsupported)}, replaceErrs: []error{unsupported}}
	fc := clock.NewFake(time.Unix(0, 0))
	var logs logBuffer
	cfg := Config{Clock: fc, SaveRetryMin: time.Second, SaveRetryMax: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	e := newEnvOn(t, RoleHub, cfg, st, true)
	_, l := e.create(t)
	cl := newClient(40)
	cl.sync(t, mustState(t, l, nil))

	res, err := l.WriteLocal(ctxT(t), cl.set(t, "app", "kept-in-memory", 1.0))
	must(t, err)
	if !res.Changed || res.Seq != 0 {
		t.Fatalf("a write the store refused to append: %+v", res)
	}
	waitFor(t, "the saver to give up", func() bool { return e.reg.SaveFailures().Permanent == 1 })
	_, err = l.WriteLocal(ctxT(t), cl.set(t, "app", "refused", 1.0))
	wantErr(t, err, ErrDegraded)
	if !errors.Is(err, persistence.ErrUnsupported) || !strings.Contains(err.Error(), "cannot save") {
		t.Fatalf("the refusal does not name its cause: %v", err)
	}
	// Nothing is scheduled to try again, and nothing tries again as time passes.
	if n := fc.Pending(); n != 0 {
		t.Fatalf("%d timers armed after a permanent failure", n)
	}
	for range 10 {
		fc.Advance(time.Minute)
		_, err = l.WriteLocal(ctxT(t), cl.set(t, "app", "refused", 2.0))
		wantErr(t, err, ErrDegraded)
	}
	if n := st.calls(); n != 1 {
		t.Fatalf("the snapshot was attempted %d times, want once", n)
	}
	if got := e.reg.SaveFailures(); got != (SaveFailures{Permanent: 1}) {
		t.Fatalf("SaveFailures %+v", got)
	}
	if n := logs.count("trying again cannot help"); n != 1 {
		t.Fatalf("the permanent failure was logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "this store keeps no snapshots") || logs.count("tries again") != 0 {
		t.Fatalf("the log does not give the cause, or speaks of retrying:\n%s", logs.String())
	}
}

// A snapshot that fails for a reason that may pass (a failing disk) is tried again with
// backoff until it is saved: the run of failures is logged once when it starts and once
// when the snapshot is saved, each failure counted (SaveFailures.Transient); the namespace
// is healthy again afterwards and its refused change survives a reload.
func TestSaver_TransientFailuresAreRetriedAndLoggedOnce(t *testing.T) {
	disk := errors.New("write /data/nomicore.db: no space left on device")
	st := &snapshotFaults{Store: newMemStore(t, persistence.Options{}),
		appendErrs: []error{persistence.ErrBackpressure}, replaceErrs: []error{disk, disk, disk, nil}}
	fc := clock.NewFake(time.Unix(0, 0))
	var logs logBuffer
	cfg := Config{Clock: fc, SaveRetryMin: time.Second, SaveRetryMax: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	e := newEnvOn(t, RoleHub, cfg, st, true)
	_, l := e.create(t)
	cl := newClient(41)
	cl.sync(t, mustState(t, l, nil))

	res, err := l.WriteLocal(ctxT(t), cl.set(t, "app", "x", 1.0))
	must(t, err)
	if res.Seq != 0 || !l.Degraded() {
		t.Fatalf("a write the store refused to append: %+v, degraded %v", res, l.Degraded())
	}
	// Each pause is the one armed after the failure, so that an advance fires one retry.
	for i, pause := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		waitFor(t, fmt.Sprintf("attempt %d", i+1), func() bool { return st.calls() == i+1 })
		if !fc.WaitForTimers(1, 10*time.Second) {
			t.Fatalf("no retry armed after failure %d", i+1)
		}
		fc.Advance(pause)
	}
	waitFor(t, "the snapshot to be saved", func() bool { return !l.Degraded() })
	if got := e.reg.SaveFailures(); got != (SaveFailures{Transient: 3}) {
		t.Fatalf("SaveFailures %+v", got)
	}
	if n := logs.count("tries again"); n != 1 {
		t.Fatalf("the run of failures was logged %d times, want once:\n%s", n, logs.String())
	}
	if n := logs.count("saved after failed attempts"); n != 1 || logs.count("failedAttempts=3") != 1 {
		t.Fatalf("the save after the failures was not logged once with its count:\n%s", logs.String())
	}
	res, err = l.WriteLocal(ctxT(t), cl.set(t, "app", "y", 1.0))
	must(t, err)
	if res.Seq == 0 {
		t.Fatalf("a write after recovery: %+v", res)
	}
	if got := reopen(t, e, l)["app"].(map[string]any); got["x"] != 1.0 || got["y"] != 1.0 {
		t.Fatalf("after reload: %v", got)
	}
}
