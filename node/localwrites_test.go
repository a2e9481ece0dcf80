package node

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/yws"
)

// The peer's door for local writes: the bytes written and not confirmed show in the
// metrics and, while the target's replication is not running (here: no connection yet),
// make the peer not ready; the editor endpoint sees the target controller's refusal of one
// update too large for the connection as yws.ErrUpdateTooLarge, with its text.
func TestLocalWritesMetricsAndReadiness(t *testing.T) {
	_, reg := newPeerRegistry(t)
	const ns = "ns-0123456789abcdef0123456789abcdef"
	tc, err := namespace.NewTargetController(namespace.TargetControllerOptions{Registry: reg,
		Targets: []namespace.Target{{NamespaceID: ns, Owner: "default"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	o, err := NewObservability(slog.New(slog.DiscardHandler), observer.SidePeer)
	if err != nil {
		t.Fatal(err)
	}
	lw, err := NewLocalWrites(tc, o)
	if err != nil {
		t.Fatal(err)
	}
	if why := lw.NotReady(); why != "" {
		t.Fatalf("not ready without writes: %q", why)
	}
	if err := lw.AdmitLocalWrite(ns, 100); err != nil {
		t.Fatalf("refused before any connection: %v", err)
	}
	lw.LocalWriteApplied(ns, 100)
	lw.Editors().Written(ns, 20)
	if why := lw.NotReady(); !strings.Contains(why, "120 bytes of local writes to 1 namespace(s) not replicated") {
		t.Fatalf("readiness %q", why)
	}
	if got, err := testutil.GatherAndCount(o.Registry, "nomicore_local_writes_unreplicated_bytes"); err != nil || got != 1 {
		t.Fatalf("series: %d %v", got, err)
	}
	mfs, err := o.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "nomicore_local_writes_unreplicated_bytes":
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 120 {
				t.Fatalf("unreplicated bytes %v", v)
			}
		case "nomicore_local_writes_unreplicated_namespaces":
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 1 {
				t.Fatalf("unreplicated namespaces %v", v)
			}
		}
	}
	if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}

	refusal := &namespace.WriteRefusedError{Reason: namespace.RefusedTooLarge, Size: 600, Limit: 512}
	err = tooLarge{refusal}
	var wr *namespace.WriteRefusedError
	if !errors.Is(err, yws.ErrUpdateTooLarge) || !errors.As(err, &wr) || err.Error() != refusal.Error() {
		t.Fatalf("editor refusal %v", err)
	}
}

// Both doors count a write in the durable ledger the same way: the admin API's
// LocalWriteApplied returns once the count is on disk, and the editor endpoint's Written
// returns the wait after which it is (the endpoint acknowledges and relays the write only
// then).
func TestLocalWritesCountedOnDiskForBothDoors(t *testing.T) {
	st, reg := newPeerRegistry(t)
	const ns = "ns-0123456789abcdef0123456789abcdef"
	ledger := NewDurableLedger(st, slog.New(slog.DiscardHandler))
	if ledger == nil {
		t.Fatal("the store keeps no ledger")
	}
	tc, err := namespace.NewTargetController(namespace.TargetControllerOptions{Registry: reg, Ledger: ledger,
		Targets: []namespace.Target{{NamespaceID: ns, Owner: "default"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	o, err := NewObservability(slog.New(slog.DiscardHandler), observer.SidePeer)
	if err != nil {
		t.Fatal(err)
	}
	lw, err := NewLocalWrites(tc, o)
	if err != nil {
		t.Fatal(err)
	}
	lw.Ledger = ledger
	ctx := context.Background()
	onDisk := func() int64 {
		t.Helper()
		got, err := loadLedger(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		return got[ns]
	}
	lw.LocalWriteApplied(ns, 100)
	if got := onDisk(); got != 100 {
		t.Fatalf("after the admin API's write: %d bytes on disk, want 100", got)
	}
	counted := lw.Editors().Written(ns, 20)
	if counted == nil {
		t.Fatal("an editor's write has no count to wait for")
	}
	if err := counted(ctx); err != nil {
		t.Fatal(err)
	}
	if got := onDisk(); got != 120 {
		t.Fatalf("after the editor's write: %d bytes on disk, want 120", got)
	}
}
