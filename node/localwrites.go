package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/yws"
)

// LocalWrites is a peer's door for local writes, shared by its admin API (POST …/update)
// and its editor endpoint: the target controller decides (a write that could never reach
// the hub is refused) and counts what was written until the hub holds it; this adds the
// metrics and the readiness rule.
//
// Metrics: nomicore_local_writes_unreplicated_bytes and
// nomicore_local_writes_unreplicated_namespaces (read at scrape), and
// nomicore_local_writes_refused_total{reason} (conflicted, failed, schema, too-large).
type LocalWrites struct {
	tc      *namespace.TargetController
	refused *prometheus.CounterVec
	// Ledger, when set, is the store that keeps the counts (the target controller's
	// Ledger): LocalWriteApplied returns once the write's count is on disk.
	Ledger *DurableLedger
}

// NewLocalWrites returns the door of tc and registers its metrics on obs.
func NewLocalWrites(tc *namespace.TargetController, obs *Observability) (*LocalWrites, error) {
	side := prometheus.Labels{"side": string(obs.Side)}
	lw := &LocalWrites{tc: tc, refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_local_writes_refused_total",
		ConstLabels: side, Help: "Local writes (admin API, editors) refused because they could never replicate, by reason " +
			"(conflicted, failed, schema, too-large)."}, []string{"reason"})}
	bytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nomicore_local_writes_unreplicated_bytes", ConstLabels: side,
		Help: "Bytes of local writes (admin API, editors) taken since the peer started that the hub has not confirmed yet."},
		func() float64 { b, _ := tc.Unreplicated(); return float64(b) })
	namespaces := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nomicore_local_writes_unreplicated_namespaces", ConstLabels: side,
		Help: "Replication targets holding local writes the hub has not confirmed yet."},
		func() float64 { _, n := tc.Unreplicated(); return float64(n) })
	for _, c := range []prometheus.Collector{lw.refused, bytes, namespaces} {
		if err := obs.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	return lw, nil
}

// AdmitLocalWrite asks the target controller whether a write of n bytes may be taken,
// counting a refusal.
func (lw *LocalWrites) AdmitLocalWrite(namespaceID string, n int) error {
	err := lw.tc.AdmitLocalWrite(namespaceID, n)
	var wr *namespace.WriteRefusedError
	if errors.As(err, &wr) {
		lw.refused.WithLabelValues(string(wr.Reason)).Inc()
	}
	return err
}

// LocalWriteApplied counts a write that changed the replica until the hub holds it. With a
// Ledger it returns once the count is on disk (the admin API answers a write once it is
// durable, and its count with it); a failure to save it is logged by the ledger.
func (lw *LocalWrites) LocalWriteApplied(namespaceID string, n int) {
	if counted := lw.count(namespaceID, n); counted != nil {
		ctx, cancel := context.WithTimeout(context.Background(), ledgerWait)
		defer cancel()
		_ = counted(ctx)
	}
}

// count is both doors' way to count a write that changed the replica: it counts it and
// returns the wait for its count to be on disk (nil without a Ledger). The admin API waits
// for it before it answers; the editor endpoint waits for it with the write's own
// durability before it tells the editor the write is saved or relays it. The count is
// queued right behind the write's own append, so the wait usually ends with the same
// commit; when the committer was between the two, it ends with the next one.
func (lw *LocalWrites) count(namespaceID string, n int) func(context.Context) error {
	lw.tc.LocalWriteApplied(namespaceID, n)
	if lw.Ledger == nil {
		return nil
	}
	if w := lw.Ledger.queued(namespaceID); w != nil {
		return w.Wait
	}
	return nil
}

// NotReady says why the peer is not ready because of its local writes: some are held by
// targets whose replication has stopped (failed, conflicted, closed) or waits for a
// connection. Writes in flight on targets that replicate do not count: they are being
// carried. Empty when there are none.
func (lw *LocalWrites) NotReady() string {
	b, n := lw.tc.Stranded()
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%d bytes of local writes to %d namespace(s) not replicated: their replication is not running (GET /v1/targets says why)", b, n)
}

// Editors is the door as the editor endpoint's write gate.
func (lw *LocalWrites) Editors() yws.WriteGate { return editorGate{lw} }

type editorGate struct{ lw *LocalWrites }

func (g editorGate) AdmitWrite(namespaceID string, n int) error {
	err := g.lw.AdmitLocalWrite(namespaceID, n)
	var wr *namespace.WriteRefusedError
	if errors.As(err, &wr) && wr.Reason == namespace.RefusedTooLarge {
		return tooLarge{wr}
	}
	return err
}

// Written counts an editor's write; the editor endpoint waits for the returned count to be
// on disk before it acknowledges or relays the write (see count).
func (g editorGate) Written(namespaceID string, n int) func(context.Context) error {
	return g.lw.count(namespaceID, n)
}

// tooLarge is the target controller's refusal of one update too large for the connection
// to the hub, as the editor endpoint knows it (yws.ErrUpdateTooLarge).
type tooLarge struct{ *namespace.WriteRefusedError }

func (e tooLarge) Is(target error) bool { return target == yws.ErrUpdateTooLarge }
func (e tooLarge) Unwrap() error        { return e.WriteRefusedError }
