package namespace_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
)

// ledgerRecorder is a LocalWriteLedger that keeps what it was told.
type ledgerRecorder struct {
	mu    sync.Mutex
	calls []string
	last  map[string]int64
}

func (l *ledgerRecorder) Record(ns string, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]int64{}
	}
	l.calls = append(l.calls, fmt.Sprintf("%s=%d", ns, n))
	l.last[ns] = n
}

func (l *ledgerRecorder) get(ns protocol.NamespaceID) (int64, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[ns.String()], len(l.calls)
}

// The ledger is told every change of a target's count: a write adds it, the hub's
// acknowledgement takes it back to zero, a write made offline is counted until the next
// connection's round confirms it, and removing the target drops it.
func TestLedgerFollowsTheCounts(t *testing.T) {
	led := &ledgerRecorder{}
	f := newNSPeerOpts(t, nsConfig(t), nsPeerOptions{ledger: led})
	ns, id, w, hubDoc := f.liveTarget()
	local := newYDoc(t, 400)

	n := f.write(ns, local.set("a", 1.0))
	if got, _ := led.get(ns); got != n {
		t.Fatalf("after a write the ledger holds %d, want %d", got, n)
	}
	up, seq := expect[*protocol.Update](w)
	hubDoc.apply(up.Update)
	w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq})
	f.waitUnreplicated(ns, 0)
	if got, _ := led.get(ns); got != 0 {
		t.Fatalf("after the acknowledgement the ledger holds %d", got)
	}

	w.end.(interface{ Drop() }).Drop()
	f.waitState(ns, observer.ChannelDisconnected)
	n = f.write(ns, local.set("b", 2.0))
	if got, _ := led.get(ns); got != n {
		t.Fatalf("offline: %d, want %d", got, n)
	}
	w = f.reconnect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	f.hubRound(w, ns, hubDoc)
	f.waitUnreplicated(ns, 0)
	if got, _ := led.get(ns); got != 0 {
		t.Fatalf("after the round the ledger holds %d", got)
	}

	w.end.(interface{ Drop() }).Drop()
	f.waitState(ns, observer.ChannelDisconnected)
	f.write(ns, local.set("c", 3.0))
	if err := f.tc.RemoveTarget(ctxT(t), ns.String()); err != nil {
		t.Fatal(err)
	}
	if got, _ := led.get(ns); got != 0 {
		t.Fatalf("after removing the target the ledger holds %d", got)
	}
}

// A controller started with the counts a ledger kept reports them — written, not confirmed,
// stranded while the target does not replicate — and adds later writes to them.
func TestLedgerCountsSurviveARestart(t *testing.T) {
	reg, _ := newRegistry(t, registry.RolePeer, persistence.Options{})
	const a, b = "ns-0000000000000000000000000000000a", "ns-0000000000000000000000000000000b"
	led := &ledgerRecorder{}
	tc, err := namespace.NewTargetController(namespace.TargetControllerOptions{Registry: reg, Ledger: led,
		Targets:      []namespace.Target{{NamespaceID: a, Owner: owner}, {NamespaceID: b, Owner: owner}},
		Unreplicated: map[string]int64{a: 1234, "ns-0000000000000000000000000000000c": 99}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if bytes, targets := tc.Unreplicated(); bytes != 1234 || targets != 1 {
		t.Fatalf("Unreplicated() = %d, %d; want the kept 1234 of one target", bytes, targets)
	}
	if bytes, targets := tc.Stranded(); bytes != 1234 || targets != 1 {
		t.Fatalf("Stranded() = %d, %d before any connection", bytes, targets)
	}
	if st, _ := tc.Target(a); st.UnreplicatedBytes != 1234 {
		t.Fatalf("target a: %+v", st)
	}
	if _, calls := led.get(protocol.MustNamespaceID(a)); calls != 0 {
		t.Fatalf("the ledger was told %d changes at start", calls)
	}
	tc.LocalWriteApplied(a, 100)
	if got, _ := led.get(protocol.MustNamespaceID(a)); got != 1334 {
		t.Fatalf("after a write: %d, want 1334", got)
	}
}
