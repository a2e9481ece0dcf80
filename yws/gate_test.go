package yws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// testGate is a WriteGate: it refuses updates over limit (ErrUpdateTooLarge) and everything
// while down is set, and counts what was written.
type testGate struct {
	mu      sync.Mutex
	limit   int
	down    error
	written int
	writes  int
	// counted, when set, is what each written update's count waits for before it is
	// durable (a peer's ledger on disk).
	counted chan struct{}
}

func (g *testGate) AdmitWrite(_ string, n int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.down != nil:
		return g.down
	case g.limit > 0 && n > g.limit:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrUpdateTooLarge, n, g.limit)
	}
	return nil
}

func (g *testGate) Written(_ string, n int) func(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.written += n
	g.writes++
	if g.counted == nil {
		return nil
	}
	counted := g.counted
	return func(ctx context.Context) error {
		select {
		case <-counted:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (g *testGate) counts() (writes, bytes int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes, g.written
}

// TestWriteGate_PeerDoor: on a node with a WriteGate (a peer), an editor's update goes
// through it: one over what the connection to the hub carries is refused alone
// (PermissionDenied naming the limit, nothing of it applied, the editor's later updates
// that build on it dropped) while other editors go on; what is written is counted; once the
// replica cannot replicate, an update closes the connection with 1013 and nothing of it is
// written, and new connections are refused with 409 REPLICA_FAILED.
func TestWriteGate_PeerDoor(t *testing.T) {
	gate := &testGate{limit: 200}
	var failed sync.Mutex
	replicaFailed := false
	e := newEnv(t, func(o *Options) {
		o.Writes = gate
		lookup := o.Namespaces
		o.Namespaces = func(ctx context.Context, id string) (string, error) {
			failed.Lock()
			defer failed.Unlock()
			if replicaFailed {
				return "", fmt.Errorf("%w: SYNC_TRANSFER_TOO_LARGE", ErrReplicaFailed)
			}
			return lookup(ctx, id)
		}
	})
	a := e.dial("writer")
	a.sync()
	ok := a.insert(0, "ok")
	eventually(t, "the write counted", func() bool { n, b := gate.counts(); return n == 1 && b == len(ok) })

	big := a.insert(2, strings.Repeat("x", 300))
	a.waitFor("PermissionDenied", func() bool { return a.count(func(m Message) bool { return m.Type == TypeAuth }) == 1 })
	var reason string
	for _, m := range a.messages() {
		if m.Type == TypeAuth {
			reason = string(m.Payload)
		}
	}
	if !strings.Contains(reason, "at most 200") {
		t.Fatalf("PermissionDenied %q does not name the limit", reason)
	}
	a.insert(0, "after") // builds on the refused update's clock: dropped
	waitMetric(t, e, "nomicore_client_refused_updates_total", 1, "reason", "too-large")
	waitMetric(t, e, "nomicore_client_refused_updates_total", 1, "reason", "after-refused")
	if got := e.docText(); got != "ok" {
		t.Fatalf("namespace text %q after refusing %d bytes", got, len(big))
	}
	if n, _ := gate.counts(); n != 1 {
		t.Fatalf("%d writes counted", n)
	}
	// Another editor is unaffected.
	b := e.dial("writer")
	b.sync()
	b.insert(2, "!")
	eventually(t, "b's edit", func() bool { return e.docText() == "ok!" })

	// The replica cannot replicate any more.
	gate.mu.Lock()
	gate.down = errors.New("replication of this namespace failed with SYNC_TRANSFER_TOO_LARGE and waits for an operator")
	gate.mu.Unlock()
	failed.Lock()
	replicaFailed = true
	failed.Unlock()
	b.insert(0, "held")
	if code := b.waitClosed(); code != websocket.StatusTryAgainLater {
		t.Fatalf("close %d, want 1013", code)
	}
	if got := e.docText(); got != "ok!" {
		t.Fatalf("namespace text %q: a refused update was written", got)
	}
	if status, body := e.status(e.ns, "writer", nil); status != 409 || !strings.Contains(body, `"code":"REPLICA_FAILED"`) {
		t.Fatalf("upgrade to a failed replica: %d %s", status, body)
	}
	waitMetric(t, e, "nomicore_client_disconnects_total", 1, "reason", "replica-failed")
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWriteGate_RelayWaitsForCount: on a peer, an editor's update goes to the room's other
// editors (as it is acknowledged as saved: one relay) only once its count of local writes
// is durable too, not as soon as the update alone is: a crash right after cannot lose the
// count of a write an editor was told is saved.
func TestWriteGate_RelayWaitsForCount(t *testing.T) {
	gate := &testGate{counted: make(chan struct{})}
	e := newEnv(t, func(o *Options) { o.Writes = gate })
	a := e.dial("writer")
	a.sync()
	b := e.dial("writer")
	b.sync()
	updates := func() int {
		return b.count(func(m Message) bool { return m.Type == TypeSync && m.Sync == SyncUpdate })
	}
	before := updates()
	a.insert(0, "counted")
	eventually(t, "the write applied and counted", func() bool { n, _ := gate.counts(); return n == 1 && e.docText() == "counted" })
	// The update is applied and durable, but its count is not: nothing is relayed yet.
	time.Sleep(300 * time.Millisecond)
	if got := updates(); got != before {
		t.Fatalf("the update was relayed before its count was durable (%d updates, %d before)", got, before)
	}
	close(gate.counted)
	b.waitFor("the relayed update", func() bool { return updates() > before })
}
