package namespace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// Recovery of failed targets (docs/protocol.md#namespace-states,
// docs/protocol.md#namespace-errors's retry column) and the ledger of local writes.

// failOpen answers the peer's next OPEN_NAMESPACE, for ns, with a namespace ERROR of code.
func failOpen(w *wire, ns protocol.NamespaceID, code protocol.ErrorCode) {
	w.t.Helper()
	open, seq := expect[*protocol.OpenNamespace](w)
	if open.NamespaceID != ns {
		w.t.Fatalf("OPEN for %s, want %s", open.NamespaceID, ns)
	}
	m, err := protocol.NewErrorMessage(protocol.ScopeNamespace, code, ns, "refused")
	must(w.t, err)
	w.send(m.WithRelatedSequence(seq))
}

// failure returns the target's recorded failure.
func (f *nsPeer) failure(ns protocol.NamespaceID) namespace.TargetFailure {
	f.t.Helper()
	st, _ := f.tc.Target(ns.String())
	if st.Failure == nil {
		f.t.Fatalf("no failure recorded (state %s)", st.State)
	}
	return *st.Failure
}

// waitAttempts waits until the target's failure counts n attempts, and returns it.
func (f *nsPeer) waitAttempts(ns protocol.NamespaceID, n int) namespace.TargetFailure {
	f.t.Helper()
	testkit.Eventually(f.t, wait, fmt.Sprintf("failure attempt %d", n), func() bool {
		st, _ := f.tc.Target(ns.String())
		return st.State == observer.ChannelFailed && st.Failure != nil && st.Failure.Attempts == n
	})
	return f.failure(ns)
}

// expectRebuildAfter requires that the peer keeps connection w until d has passed on the
// fake clock, then rebuilds it (1001, backoff reason namespace-recovery).
func (f *nsPeer) expectRebuildAfter(w *wire, d time.Duration) {
	f.t.Helper()
	w.quiet()
	f.clk.Advance(d - time.Millisecond)
	w.quiet()
	before := len(f.backoffReasons())
	f.clk.Advance(time.Millisecond)
	if code, ec := w.expectClose(); code != protocol.CloseGoingAway || ec != "" {
		f.t.Fatalf("close %d %q, want 1001 without ERROR", code, ec)
	}
	testkit.Eventually(f.t, wait, "namespace-recovery backoff", func() bool {
		r := f.backoffReasons()
		return len(r) > before && r[len(r)-1] == observer.BackoffNamespaceRecovery
	})
}

// TestS16_FailedTargetRetriesWithBackoff: a failure that heals by itself (retry reconnect or
// recovery: here the hub's INTERNAL_ERROR, then PERSISTENCE_DEGRADED) is recorded on the
// target with its code and the time of the next attempt, and retried by rebuilding the
// connection then — after 1 s, then 2 s (RetryBase doubling; the test's random source draws
// the top of each step) — until the hub serves the namespace; live clears the failure.
func TestS16_FailedTargetRetriesWithBackoff(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, id, snap := f.create()
	f.target(ns)
	w := f.connect()
	failOpen(w, ns, protocol.CodeInternalError)
	got := f.waitAttempts(ns, 1)
	want := namespace.TargetFailure{Code: "INTERNAL_ERROR", Remote: true, Cause: observer.FailedRemoteError,
		Recovery: namespace.RecoveryAutomatic, Attempts: 1, RetryAt: f.clk.Now().Add(namespace.RetryBase)}
	if got != want {
		t.Fatalf("failure %+v, want %+v", got, want)
	}
	if err := f.tc.AdmitLocalWrite(ns.String(), 10); err != nil {
		t.Fatalf("a local write to a target that retries by itself was refused: %v", err)
	}
	f.expectRebuildAfter(w, namespace.RetryBase)

	w = f.reconnect()
	failOpen(w, ns, protocol.CodePersistenceDegraded)
	got = f.waitAttempts(ns, 2)
	if got.Code != "PERSISTENCE_DEGRADED" || got.Recovery != namespace.RecoveryAutomatic || got.RetryAt != f.clk.Now().Add(2*namespace.RetryBase) {
		t.Fatalf("second failure %+v", got)
	}
	f.expectRebuildAfter(w, 2*namespace.RetryBase)

	w = f.reconnect()
	f.live(w, ns, id, snap, newYDoc(t, 300))
	if st, _ := f.tc.Target(ns.String()); st.Failure != nil {
		t.Fatalf("failure %+v still recorded once live", st.Failure)
	}
}

// TestS18_RepeatedTimeoutsBackOff: an open timeout rebuilds the connection at once
// (docs/protocol.md#namespace-states), a second one in a row only after the backoff's second
// step (2 s).
func TestS18_RepeatedTimeoutsBackOff(t *testing.T) {
	cfg := nsConfig(t)
	f := newNSPeer(t, cfg)
	ns, _, _ := f.create()
	f.target(ns)
	w := f.connect()
	expect[*protocol.OpenNamespace](w)
	w.quiet()
	f.clk.Advance(cfg.OpenTimeout)
	if code, _ := w.expectClose(); code != protocol.CloseGoingAway {
		t.Fatalf("close %d", code)
	}
	if got := f.failure(ns); got.Code != "NAMESPACE_TIMEOUT" || got.Cause != observer.FailedOpenTimeout || got.Remote || got.RetryAt != f.clk.Now() {
		t.Fatalf("failure %+v", got)
	}
	w = f.reconnect()
	expect[*protocol.OpenNamespace](w)
	w.quiet()
	f.clk.Advance(cfg.OpenTimeout)
	if got := f.waitAttempts(ns, 2); got.RetryAt != f.clk.Now().Add(2*namespace.RetryBase) {
		t.Fatalf("second timeout %+v", got)
	}
	f.expectRebuildAfter(w, 2*namespace.RetryBase)
}

// TestS16_ConfigFailureRetriesSlowlyAndOnEveryConnection: a failure an operator must remove
// (retry config: NAMESPACE_NOT_FOUND) is retried on the slow backoff (15 s, then 30 s) and
// on every new connection, whatever made it; local writes to it are refused meanwhile.
func TestS16_ConfigFailureRetriesSlowlyAndOnEveryConnection(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, id, snap := f.create()
	f.target(ns)
	w := f.connect()
	failOpen(w, ns, protocol.CodeNamespaceNotFound)
	got := f.waitAttempts(ns, 1)
	if got.Recovery != namespace.RecoveryAfterConfig || got.RetryAt != f.clk.Now().Add(namespace.ConfigRetryBase) || !got.Remote {
		t.Fatalf("failure %+v", got)
	}
	var refused *namespace.WriteRefusedError
	if err := f.tc.AdmitLocalWrite(ns.String(), 10); !errors.As(err, &refused) || refused.Reason != namespace.RefusedFailed ||
		refused.Code != "NAMESPACE_NOT_FOUND" {
		t.Fatalf("local write admitted: %v", err)
	}
	w.quiet()
	f.clk.Advance(namespace.ConfigRetryBase - time.Second)
	w.quiet()
	// A connection lost for another reason: the next one opens the target at once.
	w.end.(*wstest.End).Drop()
	w = f.reconnect()
	failOpen(w, ns, protocol.CodeNamespaceNotFound)
	if got = f.waitAttempts(ns, 2); got.RetryAt != f.clk.Now().Add(2*namespace.ConfigRetryBase) {
		t.Fatalf("second failure %+v", got)
	}
	f.expectRebuildAfter(w, 2*namespace.ConfigRetryBase)
	// The namespace exists now (the operator fixed it): it bootstraps.
	w = f.reconnect()
	f.live(w, ns, id, snap, newYDoc(t, 300))
	if err := f.tc.AdmitLocalWrite(ns.String(), 10); err != nil {
		t.Fatalf("local write refused once live: %v", err)
	}
}

// TestS16_FailureThatCannotHealWaitsForANewConnection: a protocol violation (retry no) is
// not retried by itself, however long it waits; its target refuses local writes and opens
// again only when the connection is rebuilt for another reason
// (docs/protocol.md#namespace-states).
func TestS16_FailureThatCannotHealWaitsForANewConnection(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, id, _ := f.create()
	f.target(ns)
	w := f.connect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	w.expectError(ns, protocol.CodeNamespaceStateViolation)
	got := f.waitAttempts(ns, 1)
	want := namespace.TargetFailure{Code: "NAMESPACE_STATE_VIOLATION", Cause: observer.FailedProtocolViolation,
		Recovery: namespace.RecoveryNone, Attempts: 1}
	if got != want || got.Heals() {
		t.Fatalf("failure %+v, want %+v", got, want)
	}
	var refused *namespace.WriteRefusedError
	if err := f.tc.AdmitLocalWrite(ns.String(), 10); !errors.As(err, &refused) || refused.Reason != namespace.RefusedFailed {
		t.Fatalf("local write admitted: %v", err)
	}
	w.quiet()
	f.clk.Advance(time.Hour)
	w.quiet()
	w.end.(*wstest.End).Drop()
	w = f.reconnect()
	if open, _ := expect[*protocol.OpenNamespace](w); open.NamespaceID != ns {
		t.Fatalf("OPEN for %s", open.NamespaceID)
	}
}

// flakyStore is a store whose namespace entries cannot be read while it is down, as a hub
// cluster node without quorum or whose log is not reachable answers.
type flakyStore struct {
	persistence.Store
	down atomic.Bool
}

func (s *flakyStore) Entry(ctx context.Context, id string) (persistence.Entry, error) {
	if s.down.Load() {
		return persistence.Entry{}, fmt.Errorf("test: %w", persistence.ErrUnavailable)
	}
	return s.Store.Entry(ctx, id)
}

// TestS20_HubOpenWithoutItsStoreIsPersistenceDegraded: the hub answers an OPEN it cannot
// serve because its store is unavailable with PERSISTENCE_DEGRADED (retry recovery), not
// INTERNAL_ERROR; once the store answers again, the next connection opens the namespace.
func TestS20_HubOpenWithoutItsStoreIsPersistenceDegraded(t *testing.T) {
	var fs *flakyStore
	rec := &observertest.Recorder{}
	f := newNSHubWrapped(t, nsConfig(t), persistence.Options{}, rec, rec, func(st persistence.Store) persistence.Store {
		fs = &flakyStore{Store: st}
		return fs
	})
	ns, _ := f.create()
	fs.down.Store(true)
	w := f.dial(peerID)
	seq := w.send(&protocol.OpenNamespace{NamespaceID: ns})
	if e := w.expectError(ns, protocol.CodePersistenceDegraded); e.RelatedSequence != seq || !e.Retryable {
		t.Fatalf("ERROR %+v", e)
	}
	fs.down.Store(false)
	w = f.dial(peerID)
	peerBootstrap(w, ns, newYDoc(t, 200))
}

// write makes a local write to ns as the admin API does: through the registry, then counted
// in the target controller's ledger.
func (f *nsPeer) write(ns protocol.NamespaceID, u []byte) int64 {
	f.t.Helper()
	must(f.t, writeLocal(f.t, f.reg, ns, u))
	f.tc.LocalWriteApplied(ns.String(), len(u))
	return int64(len(u))
}

func (f *nsPeer) unreplicated(ns protocol.NamespaceID) int64 {
	st, _ := f.tc.Target(ns.String())
	return st.UnreplicatedBytes
}

func (f *nsPeer) waitUnreplicated(ns protocol.NamespaceID, want int64) {
	f.t.Helper()
	testkit.Eventually(f.t, wait, fmt.Sprintf("%d bytes unreplicated (now %d)", want, f.unreplicated(ns)), func() bool { return f.unreplicated(ns) == want })
}

// TestLocalWritesCountedUntilTheHubHasThem: the ledger of local writes counts a write until
// the hub is known to hold it — its UPDATE acknowledged while live; the round of the next
// connection for a write made offline; and for a write the hub refused (PERSISTENCE_DEGRADED
// failed the namespace, which retries by itself and still takes writes), the round after
// the retry.
func TestLocalWritesCountedUntilTheHubHasThem(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, id, w, hubDoc := f.liveTarget()
	local := newYDoc(t, 400)

	n := f.write(ns, local.set("a", 1.0))
	up, seq := expect[*protocol.Update](w)
	if got := f.unreplicated(ns); got != n {
		t.Fatalf("unreplicated %d before the ACK, want %d", got, n)
	}
	if total, targets := f.tc.Unreplicated(); total != n || targets != 1 {
		t.Fatalf("Unreplicated() = %d, %d", total, targets)
	}
	if b, _ := f.tc.Stranded(); b != 0 {
		t.Fatalf("Stranded() = %d for a write in flight on a live target", b)
	}
	hubDoc.apply(up.Update)
	w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq})
	f.waitUnreplicated(ns, 0)

	// Offline.
	w.end.(*wstest.End).Drop()
	f.waitState(ns, observer.ChannelDisconnected)
	n = f.write(ns, local.set("b", 2.0))
	if got := f.unreplicated(ns); got != n {
		t.Fatalf("unreplicated %d offline, want %d", got, n)
	}
	w = f.reconnect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	f.hubRound(w, ns, hubDoc)
	f.waitUnreplicated(ns, 0)
	if hubDoc.app()["b"] != 2.0 {
		t.Fatalf("hub app %v", hubDoc.app())
	}

	// Refused by the hub.
	f.waitState(ns, observer.ChannelLive)
	n = f.write(ns, local.set("c", 3.0))
	_, seq = expect[*protocol.Update](w)
	m, err := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodePersistenceDegraded, ns, "degraded")
	must(t, err)
	w.send(m.WithRelatedSequence(seq))
	f.waitState(ns, observer.ChannelFailed)
	if err := f.tc.AdmitLocalWrite(ns.String(), 10); err != nil {
		t.Fatalf("a write to a target that retries by itself was refused: %v", err)
	}
	n += f.write(ns, local.set("d", 4.0))
	if got := f.unreplicated(ns); got != n {
		t.Fatalf("unreplicated %d after the refusal, want %d", got, n)
	}
	if b, k := f.tc.Stranded(); b != n || k != 1 {
		t.Fatalf("Stranded() = %d, %d; want %d, 1", b, k, n)
	}
	f.expectRebuildAfter(w, namespace.RetryBase)
	w = f.reconnect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	f.hubRound(w, ns, hubDoc)
	f.waitUnreplicated(ns, 0)
	if app := hubDoc.app(); app["c"] != 3.0 || app["d"] != 4.0 {
		t.Fatalf("hub app %v", app)
	}
}

// TestLocalWritesAfterALossWaitForTheRound: once updates were dropped unsent (the unsent
// queue overflowed), acknowledgements of the updates in flight confirm nothing — the dropped
// writes are older than later ones — until the round that repairs the loss completes.
func TestLocalWritesAfterALossWaitForTheRound(t *testing.T) {
	cfg := overflowConfig(t)
	f := newNSPeer(t, cfg)
	ns, _, w, hubDoc := f.liveTarget()
	local := newYDoc(t, 400)
	var total int64
	var inFlight []uint32
	for i := range cfg.MaxInFlightUpdates {
		total += f.write(ns, local.set(fmt.Sprint("w", i), 1.0))
		up, seq := expect[*protocol.Update](w)
		hubDoc.apply(up.Update)
		inFlight = append(inFlight, seq)
	}
	value := strings.Repeat("v", 600)
	for i := 0; i*600 <= cfg.MaxQueuedUpdateBytes; i++ {
		total += f.write(ns, local.set(fmt.Sprint("q", i), value))
	}
	if r, _ := expect[*protocol.ResyncRequired](w); r.ReasonCode != protocol.ResyncSendQueueOverflow {
		t.Fatalf("reason %q", r.ReasonCode)
	}
	w.quiet()
	for _, seq := range inFlight {
		w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq})
	}
	// The acknowledgements free the window and the peer opens its resync round: nothing
	// it took is confirmed before the hub has answered that round.
	s1, s1seq := expect[*protocol.SyncStep1](w)
	if got := f.unreplicated(ns); got != total {
		t.Fatalf("unreplicated %d after the acknowledgements, want all %d", got, total)
	}
	f.answerRound(w, ns, hubDoc, s1, s1seq)
	f.waitUnreplicated(ns, 0)
	if got, want := hubDoc.app(), f.peerApp(ns); !sameApp(got, want) {
		t.Fatalf("hub has %d keys, peer %d", len(got), len(want))
	}
}

// TestLocalWriteAdmission: what the peer refuses at the door — an update larger than the
// connection to the hub carries (a v1 counterpart: maxUpdateBytes; with chunked transfers:
// maxChunkedUpdateBytes), a write to a conflicted replica — and what it takes: anything
// before its first connection, namespaces that are not targets (the caller's business).
func TestLocalWriteAdmission(t *testing.T) {
	f := newNSPeer(t, nsConfig(t)) // the v1 generation: no chunked transfers
	ns, id, w, _ := f.liveTarget()
	limit := f.cfg.MaxUpdateBytes
	if err := f.tc.AdmitLocalWrite(ns.String(), limit); err != nil {
		t.Fatalf("a write of the limit was refused: %v", err)
	}
	var refused *namespace.WriteRefusedError
	err := f.tc.AdmitLocalWrite(ns.String(), limit+1)
	if !errors.As(err, &refused) || refused.Reason != namespace.RefusedTooLarge || refused.Limit != limit || refused.Size != limit+1 ||
		refused.Chunked || !strings.Contains(err.Error(), fmt.Sprint(limit)) || !strings.Contains(err.Error(), "v1") {
		t.Fatalf("over the v1 limit: %v", err)
	}
	if err := f.tc.AdmitLocalWrite(wstest.NamespaceID(77).String(), 1<<30); err != nil {
		t.Fatalf("not a target: %v", err)
	}
	w.send(&protocol.IdentityChanged{NamespaceID: ns, ReplicationID: id.ReplicationID, ReplicationEpoch: 2})
	f.waitState(ns, observer.ChannelConflicted)
	if err := f.tc.AdmitLocalWrite(ns.String(), 10); !errors.As(err, &refused) || refused.Reason != namespace.RefusedConflicted {
		t.Fatalf("conflicted: %v", err)
	}

	cfg := wstest.SmallConfig(t) // the v2 generation
	f2 := newNSPeer(t, cfg)
	ns2, id2, snap2 := f2.create()
	f2.target(ns2)
	if err := f2.tc.AdmitLocalWrite(ns2.String(), 1<<30); err != nil {
		t.Fatalf("before the first connection: %v", err)
	}
	f2.live(f2.connect(), ns2, id2, snap2, newYDoc(t, 300))
	if err := f2.tc.AdmitLocalWrite(ns2.String(), cfg.MaxUpdateBytes+1); err != nil {
		t.Fatalf("a chunked live update was refused: %v", err)
	}
	err = f2.tc.AdmitLocalWrite(ns2.String(), cfg.MaxChunkedUpdateBytes+1)
	if !errors.As(err, &refused) || refused.Reason != namespace.RefusedTooLarge || refused.Limit != cfg.MaxChunkedUpdateBytes || !refused.Chunked {
		t.Fatalf("over the chunked limit: %v", err)
	}
}
