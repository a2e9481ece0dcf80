// Package promobs turns replication events into Prometheus metrics (the metrics
// of §23.6) on a registerer the caller injects: New registers the collectors, and
// the returned Metrics is the observer.Observer to attach to the hub's or peer's
// emitters.
//
// Labels come only from {side, type, code, cause, reason, apply_effect} (GUIDE
// §9; apply_effect is applyEffect in Prometheus snake_case). Every label value is
// a member of a closed vocabulary — unknown codes fold to INTERNAL_ERROR,
// anything else invalid becomes "invalid" — so series are bounded however many
// namespaces, connections or peers there are. namespaceId, connectionId,
// syncRoundId, sequence, digests, tokens and owners never become labels. Counters
// end in _total; byte sizes and latencies go to histograms (seconds).
//
// A Metrics is safe for concurrent use; Observe takes no lock of its own beyond
// those of the client library.
package promobs

import (
	"sync/atomic"

	"github.com/nomicore/nomicore/observer"
	"github.com/prometheus/client_golang/prometheus"
)

// Histogram buckets: byte sizes from 64 B to 16 MiB, latencies from 0.5 ms to 30 s.
var (
	byteBuckets    = []float64{64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216}
	latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// Gauge reports one current value at scrape time, from the scraping goroutine.
type Gauge func() float64

// QueueStats reports the current outbound queue of one side: bytes queued for
// sending and UPDATEs in flight awaiting their ACK, summed over connections. It
// is called at scrape time, from the scraping goroutine.
type QueueStats func() (queuedBytes, inFlight float64)

// Metrics is an observer.Observer that records events as Prometheus metrics. It
// is itself a prometheus.Collector.
type Metrics struct {
	events             *prometheus.CounterVec
	backoffs           *prometheus.CounterVec
	goaways            *prometheus.CounterVec
	connectionFailures *prometheus.CounterVec
	authRejections     *prometheus.CounterVec
	resyncs            *prometheus.CounterVec
	sendFailures       *prometheus.CounterVec
	updatesDropped     *prometheus.CounterVec
	nsErrorsSent       *prometheus.CounterVec
	nsErrorsReceived   *prometheus.CounterVec
	nsFailures         *prometheus.CounterVec
	identityConflicts  *prometheus.CounterVec
	chunkedAborts      *prometheus.CounterVec
	chunkedTransfers   *prometheus.CounterVec
	chunkedBytes       *prometheus.CounterVec
	schemaRearmFails   *prometheus.CounterVec
	syncDiffEffects    *prometheus.CounterVec

	connectionsReady *prometheus.GaugeVec
	liveSessions     *prometheus.GaugeVec
	liveNamespaces   *prometheus.GaugeVec // the same count as liveSessions, under its earlier, misleading name

	updateBytes   *prometheus.HistogramVec
	syncBytes     *prometheus.HistogramVec
	snapshotBytes *prometheus.HistogramVec
	applyLatency  *prometheus.HistogramVec
	ackLatency    *prometheus.HistogramVec
	sendQueue     *prometheus.HistogramVec
	stageQueue    *prometheus.HistogramVec
	stageCheck    *prometheus.HistogramVec
	stageApply    *prometheus.HistogramVec
	stageDirty    *prometheus.HistogramVec
	loopDelay     *prometheus.HistogramVec
	backoffDelay  *prometheus.HistogramVec

	queuedBytesDesc, inFlightDesc *prometheus.Desc
	queue                         [2]atomic.Pointer[QueueStats] // by sideIndex
	assembliesDesc                *prometheus.Desc
	assemblies                    [2]atomic.Pointer[Gauge] // by sideIndex

	frames [2][numFrameKinds]frameSeries // per-frame series bound at first use (frames.go)

	all []prometheus.Collector
}

// New builds the metrics and registers them on reg (when reg is nil the caller
// registers the returned collector itself). It fails only if reg rejects them,
// for example because another Metrics is already registered there.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_" + name, Help: help}, labels)
		m.all = append(m.all, v)
		return v
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nomicore_" + name, Help: help}, labels)
		m.all = append(m.all, v)
		return v
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nomicore_" + name, Help: help, Buckets: buckets}, labels)
		m.all = append(m.all, v)
		return v
	}

	m.events = counter("events_total", "Replication events observed, by side and event type.", "side", "type")
	m.backoffs = counter("connection_backoffs_total", "Peer reconnect backoffs scheduled, by reason.", "side", "reason")
	m.goaways = counter("goaways_received_total", "GOAWAY frames received, by reason code (unknown codes as other).", "side", "reason")
	m.connectionFailures = counter("connection_failures_total", "Connections closed on an error, by stable connection code.", "side", "code")
	m.authRejections = counter("auth_upgrade_rejections_total", "WebSocket upgrades refused before a connection existed, by reason.", "side", "reason")
	m.resyncs = counter("resync_required_total", "Namespaces whose incremental continuity was declared void, by cause.", "side", "cause")
	m.sendFailures = counter("resync_send_failures_total", "Resyncs caused by a failed UPDATE send, by reason.", "side", "reason")
	m.updatesDropped = counter("updates_dropped_total", "Oversized UPDATEs dropped without a resync, by reason.", "side", "reason")
	m.nsErrorsSent = counter("namespace_errors_sent_total", "Namespace ERROR frames sent, by stable namespace code.", "side", "code")
	m.nsErrorsReceived = counter("namespace_errors_received_total", "Namespace ERROR frames received, by stable namespace code.", "side", "code")
	m.nsFailures = counter("namespace_failures_total", "Namespace channels that entered the failed state, by cause.", "side", "cause")
	m.identityConflicts = counter("identity_conflicts_total", "Namespace channels that entered conflicted, by route (identity-conflicted via).", "side", "cause")
	m.chunkedAborts = counter("chunked_transfer_aborts_total", "Partial chunked transfers discarded, by event type and reason.", "side", "type", "reason")
	m.chunkedTransfers = counter("chunked_transfers_total", "Chunked transfers sent, applied and acknowledged, by event type (chunked-update-sent, chunked-snapshot-applied, …).", "side", "type")
	m.chunkedBytes = counter("chunked_transfer_bytes_total", "Bytes of the chunked transfers sent, applied and acknowledged, by event type.", "side", "type")
	m.schemaRearmFails = counter("schema_rearm_failures_total", "Schema re-arms that failed fatally, by code.", "side", "code")
	m.syncDiffEffects = counter("sync_diff_effects_total", "Single-frame sync diffs applied with a known effect on the state vector.", "side", "apply_effect")

	m.connectionsReady = gauge("connections_ready", "Connections currently in the ready state.", "side")
	m.liveSessions = gauge("live_sessions", "Namespace sessions currently live: on the hub one per peer and namespace, on a peer one per target.", "side")
	m.liveNamespaces = gauge("live_namespaces", "Deprecated: the same count as nomicore_live_sessions, kept for existing dashboards. "+
		"It counts sessions, not namespaces (on the hub, a namespace with three live peers counts 3).", "side")

	m.updateBytes = histogram("update_bytes", "Sizes of live updates sent, applied and acknowledged (chunked: whole transfer).", byteBuckets, "side", "type")
	m.syncBytes = histogram("sync_diff_bytes", "Sizes of reconciliation diffs sent, applied and acknowledged.", byteBuckets, "side", "type")
	m.snapshotBytes = histogram("snapshot_bytes", "Sizes of bootstrap snapshots sent, imported and acknowledged.", byteBuckets, "side", "type")
	m.applyLatency = histogram("apply_latency_seconds", "Time from entering apply to apply settled, including sequencer wait.", latencyBuckets, "side", "type")
	m.ackLatency = histogram("ack_latency_seconds", "Time from sending to receiving the acknowledgement.", latencyBuckets, "side", "type")
	m.sendQueue = histogram("send_queue_seconds", "Time the oldest update of an outbound UPDATE frame waited in the send queue.", latencyBuckets, "side")
	m.stageQueue = histogram("apply_queue_wait_seconds", "Apply stage: waiting for the namespace write sequencer slot.", latencyBuckets, "side", "type")
	m.stageCheck = histogram("apply_protected_check_seconds", "Apply stage: protected-field check on a scratch copy.", latencyBuckets, "side", "type")
	m.stageApply = histogram("apply_live_apply_seconds", "Apply stage: applying to the live document.", latencyBuckets, "side", "type")
	m.stageDirty = histogram("apply_dirty_notify_seconds", "Apply stage: dirty notification to persistence.", latencyBuckets, "side", "type")
	m.loopDelay = histogram("event_loop_delay_seconds", "How late the liveness ping timer fired.", latencyBuckets, "side")
	m.backoffDelay = histogram("backoff_delay_seconds", "Reconnect backoff delays scheduled.", latencyBuckets, "side")

	m.queuedBytesDesc = prometheus.NewDesc("nomicore_queued_bytes", "Bytes queued for sending, summed over connections.", []string{"side"}, nil)
	m.inFlightDesc = prometheus.NewDesc("nomicore_in_flight_updates", "UPDATEs sent and awaiting acknowledgement, summed over connections.", []string{"side"}, nil)
	m.assembliesDesc = prometheus.NewDesc("nomicore_chunked_assemblies_in_progress", "Chunked transfers being received now, summed over connections: each holds a buffer of its declared size.", []string{"side"}, nil)

	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SetQueueStats installs (or with nil removes) the callback that reports side's
// queued bytes and in-flight updates at scrape time; the replication layer
// provides it. A callback that panics is skipped for that scrape.
func (m *Metrics) SetQueueStats(side observer.Side, f QueueStats) {
	i, ok := sideIndex(side)
	if !ok {
		return
	}
	if f == nil {
		m.queue[i].Store(nil)
		return
	}
	m.queue[i].Store(&f)
}

// SetAssemblies installs (or with nil removes) the callback that reports side's chunked
// transfers being received now; the replication layer provides it.
func (m *Metrics) SetAssemblies(side observer.Side, f Gauge) {
	i, ok := sideIndex(side)
	if !ok {
		return
	}
	if f == nil {
		m.assemblies[i].Store(nil)
		return
	}
	m.assemblies[i].Store(&f)
}

func sideIndex(s observer.Side) (int, bool) {
	switch s {
	case observer.SideHub:
		return 0, true
	case observer.SidePeer:
		return 1, true
	}
	return 0, false
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all {
		c.Describe(ch)
	}
	ch <- m.queuedBytesDesc
	ch <- m.inFlightDesc
	ch <- m.assembliesDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all {
		c.Collect(ch)
	}
	for i, side := range []observer.Side{observer.SideHub, observer.SidePeer} {
		if g := m.assemblies[i].Load(); g != nil {
			if v, ok := callGauge(*g); ok {
				ch <- prometheus.MustNewConstMetric(m.assembliesDesc, prometheus.GaugeValue, v, string(side))
			}
		}
		f := m.queue[i].Load()
		if f == nil {
			continue
		}
		queued, inFlight, ok := callQueueStats(*f)
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.queuedBytesDesc, prometheus.GaugeValue, queued, string(side))
		ch <- prometheus.MustNewConstMetric(m.inFlightDesc, prometheus.GaugeValue, inFlight, string(side))
	}
}

func callGauge(f Gauge) (v float64, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return f(), true
}

func callQueueStats(f QueueStats) (queued, inFlight float64, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	queued, inFlight = f()
	return queued, inFlight, true
}

// label returns v when it is in its closed vocabulary, else "invalid", keeping
// label values bounded even if a layer emits an unchecked value.
func label[T ~string](v T, valid bool) string {
	if valid {
		return string(v)
	}
	return "invalid"
}

func seconds(ms float64) float64 { return ms / 1000 }

// Observe records e.
func (m *Metrics) Observe(e observer.Event) {
	if e.Payload == nil {
		return
	}
	side := label(e.Side, e.Side.Valid())
	if si, ok := sideIndex(e.Side); ok && m.observeFrame(si, side, e) {
		return
	}
	typ := string(e.Type())
	m.events.WithLabelValues(side, typ).Inc()
	observeMs := func(h *prometheus.HistogramVec, o observer.Opt[float64], labels ...string) {
		if v, ok := o.Get(); ok {
			h.WithLabelValues(labels...).Observe(seconds(v))
		}
	}
	stages := func(o observer.Opt[observer.Stages]) {
		if s, ok := o.Get(); ok {
			m.stageQueue.WithLabelValues(side, typ).Observe(seconds(s.QueueWaitMs))
			m.stageCheck.WithLabelValues(side, typ).Observe(seconds(s.ProtectedCheckMs))
			m.stageApply.WithLabelValues(side, typ).Observe(seconds(s.LiveApplyMs))
			m.stageDirty.WithLabelValues(side, typ).Observe(seconds(s.DirtyNotifyMs))
		}
	}
	size := func(h *prometheus.HistogramVec, n float64) { h.WithLabelValues(side, typ).Observe(n) }
	transfer := func(h *prometheus.HistogramVec, n float64) {
		size(h, n)
		m.chunkedTransfers.WithLabelValues(side, typ).Inc()
		m.chunkedBytes.WithLabelValues(side, typ).Add(n)
	}

	switch p := e.Payload.(type) {
	case observer.ConnectionStateChanged:
		if p.From == observer.ConnReady {
			m.connectionsReady.WithLabelValues(side).Dec()
		}
		if p.To == observer.ConnReady {
			m.connectionsReady.WithLabelValues(side).Inc()
		}
	case observer.ConnectionBackoffScheduled:
		m.backoffs.WithLabelValues(side, label(p.Reason, p.Reason.Valid())).Inc()
		m.backoffDelay.WithLabelValues(side).Observe(seconds(p.DelayMs))
	case observer.GoAwayReceived:
		m.goaways.WithLabelValues(side, string(observer.FoldGoAwayReason(string(p.ReasonCode)))).Inc()
	case observer.EventLoopDelaySampled:
		m.loopDelay.WithLabelValues(side).Observe(seconds(p.DelayMs))
	case observer.ChannelStateChanged:
		if p.From == observer.ChannelLive {
			m.liveSessions.WithLabelValues(side).Dec()
			m.liveNamespaces.WithLabelValues(side).Dec()
		}
		if p.To == observer.ChannelLive {
			m.liveSessions.WithLabelValues(side).Inc()
			m.liveNamespaces.WithLabelValues(side).Inc()
		}

	case observer.BootstrapSnapshotSent:
		size(m.snapshotBytes, float64(p.Bytes))
	case observer.BootstrapImported:
		size(m.snapshotBytes, float64(p.Bytes))
	case observer.SyncStep2Sent:
		size(m.syncBytes, float64(p.Bytes))
	case observer.SyncDiffApplied:
		size(m.syncBytes, float64(p.Bytes))
		observeMs(m.applyLatency, p.ApplyLatencyMs, side, typ)
		if g, ok := p.Effect.Get(); ok {
			m.syncDiffEffects.WithLabelValues(side, string(g.ApplyEffect())).Inc()
		}
		stages(p.Stages)
	case observer.UpdateSent:
		size(m.updateBytes, float64(p.Bytes))
		observeMs(m.sendQueue, p.SendQueueMs, side)
	case observer.UpdateApplied:
		size(m.updateBytes, float64(p.Bytes))
		observeMs(m.applyLatency, p.ApplyLatencyMs, side, typ)
		stages(p.Stages)
	case observer.UpdateAcked:
		size(m.updateBytes, float64(p.Bytes))
		observeMs(m.ackLatency, p.AckLatencyMs, side, typ)
	case observer.DegradedBypassApplied:
		size(m.updateBytes, float64(p.Bytes))
	case observer.ChunkedUpdateSent:
		transfer(m.updateBytes, float64(p.TotalBytes))
	case observer.ChunkedUpdateApplied:
		transfer(m.updateBytes, float64(p.Bytes))
		observeMs(m.applyLatency, p.ApplyLatencyMs, side, typ)
	case observer.ChunkedUpdateAcked:
		transfer(m.updateBytes, float64(p.Bytes))
		observeMs(m.ackLatency, p.AckLatencyMs, side, typ)
	case observer.ChunkedSnapshotSent:
		transfer(m.snapshotBytes, float64(p.TotalBytes))
	case observer.ChunkedSnapshotApplied:
		transfer(m.snapshotBytes, float64(p.Bytes))
		observeMs(m.applyLatency, p.ApplyLatencyMs, side, typ)
	case observer.ChunkedSnapshotAcked:
		transfer(m.snapshotBytes, float64(p.Bytes))
		observeMs(m.ackLatency, p.AckLatencyMs, side, typ)
	case observer.ChunkedSyncSent:
		transfer(m.syncBytes, float64(p.TotalBytes))
	case observer.ChunkedSyncApplied:
		transfer(m.syncBytes, float64(p.Bytes))
		observeMs(m.applyLatency, p.ApplyLatencyMs, side, typ)
	case observer.ChunkedSyncAcked:
		transfer(m.syncBytes, float64(p.Bytes))
		observeMs(m.ackLatency, p.AckLatencyMs, side, typ)

	case observer.AuthUpgradeRejected:
		m.authRejections.WithLabelValues(side, label(p.Reason, p.Reason.Valid())).Inc()
	case observer.ResyncRequired:
		m.resyncs.WithLabelValues(side, label(p.Cause, p.Cause.Valid())).Inc()
		if g, ok := p.SendFailure.Get(); ok {
			m.sendFailures.WithLabelValues(side, label(g.Reason, g.Reason.Valid())).Inc()
		}
	case observer.UpdateDropped:
		m.updatesDropped.WithLabelValues(side, label(p.Reason, p.Reason.Valid())).Inc()

	case observer.ConnectionFailed:
		m.connectionFailures.WithLabelValues(side, string(observer.FoldConnectionCode(string(p.Code)))).Inc()
	case observer.NamespaceError:
		code := string(observer.FoldNamespaceCode(string(p.Code)))
		switch p.Direction {
		case observer.DirectionSent:
			m.nsErrorsSent.WithLabelValues(side, code).Inc()
		case observer.DirectionReceived:
			m.nsErrorsReceived.WithLabelValues(side, code).Inc()
		}
	case observer.NamespaceFailed:
		m.nsFailures.WithLabelValues(side, label(p.Cause, p.Cause.Valid())).Inc()
	case observer.IdentityConflicted:
		m.identityConflicts.WithLabelValues(side, label(p.Via, p.Via.Valid())).Inc()
	case observer.ChunkedUpdateAborted:
		m.chunkedAborts.WithLabelValues(side, typ, label(p.Reason, p.Reason.Valid())).Inc()
	case observer.ChunkedSnapshotAborted:
		m.chunkedAborts.WithLabelValues(side, typ, label(p.Reason, p.Reason.Valid())).Inc()
	case observer.ChunkedSyncAborted:
		m.chunkedAborts.WithLabelValues(side, typ, label(p.Reason, p.Reason.Valid())).Inc()
	case observer.SchemaRearmFailed:
		m.schemaRearmFails.WithLabelValues(side, label(p.Code, p.Code.Valid())).Inc()
	}
	// send-paused/resumed and schema-rearm-applied are counted by events_total only.
}
