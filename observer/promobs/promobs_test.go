package promobs_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	o "github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/observer/promobs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ns = observertest.SampleNamespaceID

func newMetrics(t testing.TB) (*promobs.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := promobs.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// feedAll observes every sample, full and minimal, on every side that may emit
// it, so that every metric has at least one series.
func feedAll(m *promobs.Metrics) {
	for _, s := range observertest.Samples() {
		for _, side := range o.Sides() {
			if !s.Type.EmittedBy(side) {
				continue
			}
			for _, ev := range []o.Event{s.Full, s.Minimal} {
				ev.Side = side
				m.Observe(ev)
			}
		}
	}
	m.SetQueueStats(o.SideHub, func() (float64, float64) { return 4096, 3 })
	m.SetAssemblies(o.SideHub, func() float64 { return 2 })
}

func TestS23_6_PromlintClean(t *testing.T) {
	m, reg := newMetrics(t)
	feedAll(m)
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	families, err := reg.Gather() // the pedantic registry also checks descriptors
	if err != nil {
		t.Fatal(err)
	}
	descs := make(chan *prometheus.Desc, 64)
	m.Describe(descs)
	close(descs)
	if len(families) != len(descs) {
		t.Errorf("gathered %d metric families of %d described: lint did not see them all", len(families), len(descs))
	}
}

// TestS23_6_LabelsAndNames: names are nomicore_…, counters end in _total, and the
// only label names are side, type, code, cause, reason and apply_effect.
func TestS23_6_LabelsAndNames(t *testing.T) {
	m, reg := newMetrics(t)
	feedAll(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"side": true, "type": true, "code": true, "cause": true, "reason": true, "apply_effect": true}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "nomicore_") {
			t.Errorf("metric %s lacks the nomicore_ prefix", name)
		}
		if isCounter := f.GetType().String() == "COUNTER"; isCounter != strings.HasSuffix(name, "_total") {
			t.Errorf("metric %s: counter=%v but _total suffix=%v", name, isCounter, !isCounter)
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if !allowed[l.GetName()] {
					t.Errorf("metric %s has label %s", name, l.GetName())
				}
				if strings.HasPrefix(l.GetValue(), "ns-") || l.GetValue() == observertest.SampleConnectionID {
					t.Errorf("metric %s carries an identifier as label value %q", name, l.GetValue())
				}
			}
		}
	}
}

// TestS23_6_GoldenExposition feeds a small sequence and compares with exposition
// text written by hand.
func TestS23_6_GoldenExposition(t *testing.T) {
	m, _ := newMetrics(t)
	emit := func(side o.Side, p o.Payload) { m.Observe(o.Event{Side: side, Payload: p}) }
	peer, hub := o.SidePeer, o.SideHub
	emit(peer, o.ConnectionStateChanged{From: o.ConnConnecting, To: o.ConnHandshaking})
	emit(peer, o.ConnectionStateChanged{From: o.ConnHandshaking, To: o.ConnReady})
	emit(hub, o.ConnectionStateChanged{From: o.ConnHandshaking, To: o.ConnReady})
	emit(hub, o.ConnectionStateChanged{From: o.ConnHandshaking, To: o.ConnReady})
	emit(hub, o.ConnectionStateChanged{From: o.ConnReady, To: o.ConnDraining})
	emit(peer, o.ChannelStateChanged{NamespaceID: ns, From: o.ChannelReconciling, To: o.ChannelLive})
	emit(peer, o.ChannelStateChanged{NamespaceID: "ns-ffffffffffffffffffffffffffffffff", From: o.ChannelReconciling, To: o.ChannelLive})
	emit(peer, o.ChannelStateChanged{NamespaceID: ns, From: o.ChannelLive, To: o.ChannelNeedsResync})
	emit(peer, o.NamespaceFailed{NamespaceID: ns, Cause: o.FailedOpenTimeout, TimeoutMs: o.Some[uint64](15000)})
	emit(peer, o.NamespaceError{NamespaceID: ns, Code: o.NsErrApplyFailed, Direction: o.DirectionSent})
	emit(peer, o.NamespaceError{NamespaceID: ns, Code: "WEIRD_REMOTE_CODE", Direction: o.DirectionReceived})
	emit(peer, o.ConnectionFailed{Code: o.ConnErrPongTimeout, WSCloseCode: 1001})
	emit(peer, o.UpdateApplied{NamespaceID: ns, Bytes: 10, Sequence: 1, ApplyLatencyMs: o.Some(250.0)})
	emit(peer, o.UpdateApplied{NamespaceID: ns, Bytes: 10, Sequence: 2, ApplyLatencyMs: o.Some(1500.0)})
	emit(peer, o.ResyncRequired{NamespaceID: ns, Cause: o.ResyncSendFailed, SendFailure: o.Some(o.SendFailure{
		Reason: o.SendUpdateTooLarge, QueueSample: o.QueueSample{ChannelState: o.ChannelNeedsResync, ConnectionState: o.ConnReady}})})
	emit(peer, o.GoAwayReceived{ReasonCode: "MAINTENANCE", DrainTimeoutMs: 1000})

	const want = `
# HELP nomicore_events_total Replication events observed, by side and event type.
# TYPE nomicore_events_total counter
nomicore_events_total{side="hub",type="connection-state-changed"} 3
nomicore_events_total{side="peer",type="connection-state-changed"} 2
nomicore_events_total{side="peer",type="channel-state-changed"} 3
nomicore_events_total{side="peer",type="namespace-failed"} 1
nomicore_events_total{side="peer",type="namespace-error"} 2
nomicore_events_total{side="peer",type="connection-failed"} 1
nomicore_events_total{side="peer",type="update-applied"} 2
nomicore_events_total{side="peer",type="resync-required"} 1
nomicore_events_total{side="peer",type="goaway-received"} 1
# HELP nomicore_connections_ready Connections currently in the ready state.
# TYPE nomicore_connections_ready gauge
nomicore_connections_ready{side="hub"} 1
nomicore_connections_ready{side="peer"} 1
# HELP nomicore_live_sessions Namespace sessions currently live: on the hub one per peer and namespace, on a peer one per target.
# TYPE nomicore_live_sessions gauge
nomicore_live_sessions{side="peer"} 1
# HELP nomicore_live_namespaces Deprecated: the same count as nomicore_live_sessions, kept for existing dashboards. It counts sessions, not namespaces (on the hub, a namespace with three live peers counts 3).
# TYPE nomicore_live_namespaces gauge
nomicore_live_namespaces{side="peer"} 1
# HELP nomicore_namespace_failures_total Namespace channels that entered the failed state, by cause.
# TYPE nomicore_namespace_failures_total counter
nomicore_namespace_failures_total{cause="open-timeout",side="peer"} 1
# HELP nomicore_namespace_errors_sent_total Namespace ERROR frames sent, by stable namespace code.
# TYPE nomicore_namespace_errors_sent_total counter
nomicore_namespace_errors_sent_total{code="APPLY_FAILED",side="peer"} 1
# HELP nomicore_namespace_errors_received_total Namespace ERROR frames received, by stable namespace code.
# TYPE nomicore_namespace_errors_received_total counter
nomicore_namespace_errors_received_total{code="INTERNAL_ERROR",side="peer"} 1
# HELP nomicore_connection_failures_total Connections closed on an error, by stable connection code.
# TYPE nomicore_connection_failures_total counter
nomicore_connection_failures_total{code="PONG_TIMEOUT",side="peer"} 1
# HELP nomicore_resync_required_total Namespaces whose incremental continuity was declared void, by cause.
# TYPE nomicore_resync_required_total counter
nomicore_resync_required_total{cause="send-failed",side="peer"} 1
# HELP nomicore_resync_send_failures_total Resyncs caused by a failed UPDATE send, by reason.
# TYPE nomicore_resync_send_failures_total counter
nomicore_resync_send_failures_total{reason="update-too-large",side="peer"} 1
# HELP nomicore_goaways_received_total GOAWAY frames received, by reason code (unknown codes as other).
# TYPE nomicore_goaways_received_total counter
nomicore_goaways_received_total{reason="other",side="peer"} 1
# HELP nomicore_apply_latency_seconds Time from entering apply to apply settled, including sequencer wait.
# TYPE nomicore_apply_latency_seconds histogram
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.0005"} 0
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.001"} 0
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.0025"} 0
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.005"} 0
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.01"} 0
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.025"} 0
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.05"} 0
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.1"} 0
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.25"} 1
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="0.5"} 1
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="1"} 1
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="2.5"} 2
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="5"} 2
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="10"} 2
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="30"} 2
nomicore_apply_latency_seconds_bucket{side="peer",type="update-applied",le="+Inf"} 2
nomicore_apply_latency_seconds_sum{side="peer",type="update-applied"} 1.75
nomicore_apply_latency_seconds_count{side="peer",type="update-applied"} 2
`
	names := []string{"nomicore_events_total", "nomicore_connections_ready", "nomicore_live_sessions", "nomicore_live_namespaces",
		"nomicore_namespace_failures_total", "nomicore_namespace_errors_sent_total",
		"nomicore_namespace_errors_received_total", "nomicore_connection_failures_total",
		"nomicore_resync_required_total", "nomicore_resync_send_failures_total",
		"nomicore_goaways_received_total", "nomicore_apply_latency_seconds"}
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// countSeries returns the number of series the registry exposes.
func countSeries(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		n += len(f.GetMetric())
	}
	return n
}

// TestS23_6_BoundedCardinality: 10,000 events with distinct namespaces and
// connections create no series beyond those one namespace creates, and values
// outside the vocabularies collapse to one bounded label.
func TestS23_6_BoundedCardinality(t *testing.T) {
	m, reg := newMetrics(t)
	burst := func(i int) {
		nsID := fmt.Sprintf("ns-%032x", i)
		conn := o.Some(fmt.Sprintf("c-%d", i))
		for _, p := range []o.Payload{
			o.ChannelStateChanged{ConnectionID: conn, NamespaceID: nsID, From: o.ChannelReconciling, To: o.ChannelLive},
			o.UpdateApplied{ConnectionID: conn, NamespaceID: nsID, Bytes: i, Sequence: uint32(i + 1), ApplyLatencyMs: o.Some(float64(i % 50))},
			o.SyncDiffApplied{ConnectionID: conn, NamespaceID: nsID, Bytes: 2, SyncRoundID: uint32(i), Sequence: 1,
				Effect: o.Some(o.NewSVEffect([]byte{byte(i)}, []byte{byte(i), 1}))},
			o.NamespaceError{ConnectionID: conn, NamespaceID: nsID, Code: o.NamespaceCode(fmt.Sprintf("REMOTE_%d", i)), Direction: o.DirectionReceived},
			o.ConnectionFailed{ConnectionID: conn, Code: o.ConnectionCode(fmt.Sprintf("E%d", i)), WSCloseCode: 1011},
			o.GoAwayReceived{ConnectionID: conn, ReasonCode: o.GoAwayReason(fmt.Sprintf("R%d", i))},
			o.NamespaceFailed{ConnectionID: conn, NamespaceID: nsID, Cause: o.FailedCause(fmt.Sprintf("cause-%d", i))},
		} {
			m.Observe(o.Event{Side: o.SideHub, Payload: p})
		}
	}
	burst(0)
	base := countSeries(t, reg)
	for i := 1; i < 10000; i++ {
		burst(i)
	}
	if got := countSeries(t, reg); got != base {
		t.Errorf("10,000 distinct namespaces grew the series from %d to %d", base, got)
	}
	if v := testutil.ToFloat64(must(t, reg, "nomicore_namespace_failures_total", "invalid")); v != 10000 {
		t.Errorf("invalid causes counted %v times, want 10000", v)
	}
	if v := testutil.ToFloat64(must(t, reg, "nomicore_connection_failures_total", "INTERNAL_ERROR")); v != 10000 {
		t.Errorf("unknown connection codes folded %v times, want 10000", v)
	}
	// A side outside hub/peer is also bounded.
	m.Observe(o.Event{Side: "edge-7", Payload: o.SendPaused{BufferedAmount: 1}})
	if v := testutil.ToFloat64(must(t, reg, "nomicore_events_total", "invalid")); v != 1 {
		t.Errorf("events with an invalid side: %v", v)
	}
}

// must finds the single series of metric name whose labels include value.
func must(t *testing.T, reg *prometheus.Registry, name, value string) prometheus.Collector {
	t.Helper()
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetValue() == value {
					v := metric.GetCounter().GetValue()
					return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "probe_total", Help: "probe"}, func() float64 { return v })
				}
			}
		}
	}
	t.Fatalf("no %s series with label value %q", name, value)
	return nil
}

func TestS23_6_QueueStatsAreReadAtScrape(t *testing.T) {
	m, _ := newMetrics(t)
	calls := 0
	m.SetQueueStats(o.SidePeer, func() (float64, float64) { calls++; return 1024, 5 })
	m.SetQueueStats(o.SideHub, func() (float64, float64) { panic("ws layer bug") })
	m.SetQueueStats("edge", func() (float64, float64) { return 1, 1 }) // ignored
	want := `
# HELP nomicore_queued_bytes Bytes queued for sending, summed over connections.
# TYPE nomicore_queued_bytes gauge
nomicore_queued_bytes{side="peer"} 1024
# HELP nomicore_in_flight_updates UPDATEs sent and awaiting acknowledgement, summed over connections.
# TYPE nomicore_in_flight_updates gauge
nomicore_in_flight_updates{side="peer"} 5
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "nomicore_queued_bytes", "nomicore_in_flight_updates"); err != nil {
		t.Error(err)
	}
	if calls != 1 {
		t.Errorf("callback called %d times for one scrape", calls)
	}
	m.SetQueueStats(o.SidePeer, nil)
	if n := testutil.CollectAndCount(m, "nomicore_queued_bytes"); n != 0 {
		t.Errorf("removed callback still exposes %d series", n)
	}
}

// TestS23_6_ChunkedTransfers: the chunked transfers sent, applied and acknowledged are
// counted with their bytes by event type, and the assemblies in progress are read at scrape.
func TestS23_6_ChunkedTransfers(t *testing.T) {
	m, _ := newMetrics(t)
	n := 0.0
	m.SetAssemblies(o.SidePeer, func() float64 { return n })
	m.SetAssemblies(o.SideHub, func() float64 { panic("namespace layer bug") })
	m.Observe(o.Event{Side: o.SideHub, Payload: o.ChunkedSnapshotSent{NamespaceID: ns, TransferID: 1, ChunkCount: 64, TotalBytes: 32 << 20}})
	m.Observe(o.Event{Side: o.SidePeer, Payload: o.ChunkedSnapshotApplied{NamespaceID: ns, Bytes: 32 << 20, ChunkCount: 64}})
	m.Observe(o.Event{Side: o.SidePeer, Payload: o.ChunkedUpdateApplied{NamespaceID: ns, Bytes: 1000, ChunkCount: 2}})
	m.Observe(o.Event{Side: o.SidePeer, Payload: o.ChunkedUpdateApplied{NamespaceID: ns, Bytes: 3000, ChunkCount: 6}})
	n = 3
	want := `
# HELP nomicore_chunked_assemblies_in_progress Chunked transfers being received now, summed over connections: each holds a buffer of its declared size.
# TYPE nomicore_chunked_assemblies_in_progress gauge
nomicore_chunked_assemblies_in_progress{side="peer"} 3
# HELP nomicore_chunked_transfers_total Chunked transfers sent, applied and acknowledged, by event type (chunked-update-sent, chunked-snapshot-applied, …).
# TYPE nomicore_chunked_transfers_total counter
nomicore_chunked_transfers_total{side="hub",type="chunked-snapshot-sent"} 1
nomicore_chunked_transfers_total{side="peer",type="chunked-snapshot-applied"} 1
nomicore_chunked_transfers_total{side="peer",type="chunked-update-applied"} 2
# HELP nomicore_chunked_transfer_bytes_total Bytes of the chunked transfers sent, applied and acknowledged, by event type.
# TYPE nomicore_chunked_transfer_bytes_total counter
nomicore_chunked_transfer_bytes_total{side="hub",type="chunked-snapshot-sent"} 3.3554432e+07
nomicore_chunked_transfer_bytes_total{side="peer",type="chunked-snapshot-applied"} 3.3554432e+07
nomicore_chunked_transfer_bytes_total{side="peer",type="chunked-update-applied"} 4000
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "nomicore_chunked_assemblies_in_progress",
		"nomicore_chunked_transfers_total", "nomicore_chunked_transfer_bytes_total"); err != nil {
		t.Error(err)
	}
}

func TestS23_6_GaugesFollowTransitions(t *testing.T) {
	m, reg := newMetrics(t)
	emit := func(p o.Payload) { m.Observe(o.Event{Side: o.SideHub, Payload: p}) }
	for range 3 {
		emit(o.ConnectionStateChanged{From: o.ConnHandshaking, To: o.ConnReady})
		emit(o.ChannelStateChanged{NamespaceID: ns, From: o.ChannelReconciling, To: o.ChannelLive})
	}
	emit(o.ConnectionStateChanged{From: o.ConnReady, To: o.ConnDraining})
	emit(o.ConnectionStateChanged{From: o.ConnDraining, To: o.ConnClosed})
	emit(o.ChannelStateChanged{NamespaceID: ns, From: o.ChannelLive, To: o.ChannelNeedsResync})
	emit(o.ChannelStateChanged{NamespaceID: ns, From: o.ChannelNeedsResync, To: o.ChannelReconciling})
	emit(o.ChannelStateChanged{NamespaceID: ns, From: o.ChannelLive, To: o.ChannelClosing})
	want := `
# HELP nomicore_connections_ready Connections currently in the ready state.
# TYPE nomicore_connections_ready gauge
nomicore_connections_ready{side="hub"} 2
# HELP nomicore_live_sessions Namespace sessions currently live: on the hub one per peer and namespace, on a peer one per target.
# TYPE nomicore_live_sessions gauge
nomicore_live_sessions{side="hub"} 1
# HELP nomicore_live_namespaces Deprecated: the same count as nomicore_live_sessions, kept for existing dashboards. It counts sessions, not namespaces (on the hub, a namespace with three live peers counts 3).
# TYPE nomicore_live_namespaces gauge
nomicore_live_namespaces{side="hub"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nomicore_connections_ready", "nomicore_live_sessions", "nomicore_live_namespaces"); err != nil {
		t.Error(err)
	}
}

func TestNewRejectsDoubleRegistration(t *testing.T) {
	_, reg := newMetrics(t)
	if _, err := promobs.New(reg); err == nil {
		t.Error("registering a second Metrics on the same registry must fail")
	}
	if m, err := promobs.New(nil); err != nil || m == nil {
		t.Errorf("New(nil) = %v, %v", m, err)
	}
}

func TestS23_6_ConcurrentObserveAndScrape(t *testing.T) {
	m, reg := newMetrics(t)
	samples := observertest.Samples()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 300 {
				m.Observe(samples[(g+i)%len(samples)].Full)
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	families, _ := reg.Gather()
	total := 0.0
	for _, f := range families {
		if f.GetName() == "nomicore_events_total" {
			for _, metric := range f.GetMetric() {
				total += metric.GetCounter().GetValue()
			}
		}
	}
	if total != 1800 {
		t.Errorf("events_total sums to %v, want 1800", total)
	}
}

func BenchmarkObserveUpdateApplied(b *testing.B) {
	m, _ := newMetrics(b)
	ev := o.Event{Side: o.SideHub, Payload: o.UpdateApplied{NamespaceID: ns, Bytes: 100, Sequence: 1, ApplyLatencyMs: o.Some(1.5)}}
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(ev)
	}
}

// TestPerFrameEventsAllocateNothing: once a side and type have been seen, a per-frame event
// (every one of them, with every optional field set) is recorded without allocating — the
// series are bound, not looked up by label.
func TestPerFrameEventsAllocateNothing(t *testing.T) {
	m, _ := newMetrics(t)
	for _, s := range observertest.Samples() {
		if !s.Type.PerFrame() {
			continue
		}
		for _, side := range o.Sides() {
			if !s.Type.EmittedBy(side) {
				continue
			}
			ev := s.Full
			ev.Side = side
			m.Observe(ev) // binds the series
			if n := testing.AllocsPerRun(100, func() { m.Observe(ev) }); n != 0 {
				t.Errorf("%s on the %s: %v allocations per event", s.Type, side, n)
			}
		}
	}
}
