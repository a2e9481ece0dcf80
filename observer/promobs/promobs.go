// Package promobs turns replication events into Prometheus metrics (the metrics
// adapter of docs/protocol.md#adapters) on a registerer the caller injects: New
// registers the collectors, and the returned Metrics is the observer.Observer to
// attach to the hub's or peer's emitters.
//
// Labels come only from {side, type, code, cause, reason, apply_effect}
// (apply_effect is applyEffect in Prometheus snake_case). Every label value is
// a member of a closed vocabulary — unknown codes fold to INTERNAL_ERROR,
// anything else invalid becomes "invalid" — so series are bounded however many
// namespaces, connections or peers there are. namespaceId, connectionId,
// syncRoundId, sequence, digests, tokens and owners never become labels. Counters
// end in _total; byte sizes and latencies go to histograms (seconds).
//
// The metrics know no event type by itself: each event's description gives its
// size and durations (Event.Measure) and its closed-vocabulary words
// (Event.Words), and every metric is declared by what it records — sizes by content,
// durations by what they time, a counter by the event key it counts.
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
	events           *prometheus.CounterVec
	chunkedTransfers *prometheus.CounterVec
	chunkedBytes     *prometheus.CounterVec
	durations        [observer.NumDurations]durationMetric
	stages           [4]*prometheus.HistogramVec // the apply stages, in the order of observer.Stages's fields

	// types holds the metrics of every event type, in the order of observer.Types;
	// built by New, read-only after.
	types []*typeMetrics

	queuedBytesDesc, inFlightDesc *prometheus.Desc
	queue                         [2]atomic.Pointer[QueueStats] // by sideIndex
	assembliesDesc                *prometheus.Desc
	assemblies                    [2]atomic.Pointer[Gauge] // by sideIndex

	all []prometheus.Collector
}

// durationMetric is the histogram of one kind of duration.
type durationMetric struct {
	vec    *prometheus.HistogramVec
	byType bool // labelled by side and event type; otherwise by side alone
}

// typeMetrics are the metrics one event type feeds.
type typeMetrics struct {
	typ     string
	size    *prometheus.HistogramVec // the histogram of its content's sizes; nil when it has none
	chunked bool                     // its size also feeds the chunked transfer counters
	counts  []wordCounter
	gauges  []stateGauge
	bound   [numSideLabels]boundSeries // its series labelled by side and type alone (series.go)
}

// wordCounter counts the events of one type by one of their words.
type wordCounter struct {
	key    string
	when   observer.Word // counts only the events whose word when.Key is when.Value; zero: all
	vec    *prometheus.CounterVec
	byType bool // labelled by type too, between side and the word
}

// stateGauge follows how many things are in one state, from the from and to
// words of a state change.
type stateGauge struct {
	state string
	vec   *prometheus.GaugeVec
}

// New builds the metrics and registers them on reg (when reg is nil the caller
// registers the returned collector itself). It fails only if reg rejects them,
// for example because another Metrics is already registered there.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{}
	byName := map[observer.Type]*typeMetrics{}
	for _, t := range observer.Types() {
		tm := &typeMetrics{typ: string(t), chunked: t.Chunked()}
		m.types = append(m.types, tm)
		byName[t] = tm
	}
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
	// countBy makes vec, labelled by side and a word, count the events of the types
	// by their word key; countByType is the same for a vec labelled by side, type
	// and the word; countWhen counts only the events whose word whenKey is
	// whenValue.
	count := func(vec *prometheus.CounterVec, key string, when observer.Word, byType bool, types ...observer.Type) {
		for _, t := range types {
			tm := byName[t]
			tm.counts = append(tm.counts, wordCounter{key: key, when: when, vec: vec, byType: byType})
		}
	}
	countBy := func(vec *prometheus.CounterVec, key string, types ...observer.Type) {
		count(vec, key, observer.Word{}, false, types...)
	}
	countByType := func(vec *prometheus.CounterVec, key string, types ...observer.Type) {
		count(vec, key, observer.Word{}, true, types...)
	}
	countWhen := func(vec *prometheus.CounterVec, key, whenKey, whenValue string, t observer.Type) {
		count(vec, key, observer.Word{Key: whenKey, Value: whenValue}, false, t)
	}
	// follow makes vec follow how many things are in state, from the state changes of t.
	follow := func(vec *prometheus.GaugeVec, t observer.Type, state string) {
		byName[t].gauges = append(byName[t].gauges, stateGauge{state: state, vec: vec})
	}

	m.events = counter("events_total", "Replication events observed, by side and event type.", "side", "type")
	countBy(counter("connection_backoffs_total", "Peer reconnect backoffs scheduled, by reason.", "side", "reason"),
		"reason", observer.TypeConnectionBackoffScheduled)
	countBy(counter("goaways_received_total", "GOAWAY frames received, by reason code (unknown codes as other).", "side", "reason"),
		"reasonCode", observer.TypeGoAwayReceived)
	countBy(counter("connection_failures_total", "Connections closed on an error, by stable connection code.", "side", "code"),
		"code", observer.TypeConnectionFailed)
	countBy(counter("auth_upgrade_rejections_total", "WebSocket upgrades refused before a connection existed, by reason.", "side", "reason"),
		"reason", observer.TypeAuthUpgradeRejected)
	countBy(counter("resync_required_total", "Namespaces whose incremental continuity was declared void, by cause.", "side", "cause"),
		"cause", observer.TypeResyncRequired)
	countBy(counter("resync_send_failures_total", "Resyncs caused by a failed UPDATE send, by reason.", "side", "reason"),
		"reason", observer.TypeResyncRequired)
	countBy(counter("updates_dropped_total", "Oversized UPDATEs dropped without a resync, by reason.", "side", "reason"),
		"reason", observer.TypeUpdateDropped)
	countWhen(counter("namespace_errors_sent_total", "Namespace ERROR frames sent, by stable namespace code.", "side", "code"),
		"code", "direction", string(observer.DirectionSent), observer.TypeNamespaceError)
	countWhen(counter("namespace_errors_received_total", "Namespace ERROR frames received, by stable namespace code.", "side", "code"),
		"code", "direction", string(observer.DirectionReceived), observer.TypeNamespaceError)
	countBy(counter("namespace_failures_total", "Namespace channels that entered the failed state, by cause.", "side", "cause"),
		"cause", observer.TypeNamespaceFailed)
	countBy(counter("identity_conflicts_total", "Namespace channels that entered conflicted, by route (identity-conflicted via).", "side", "cause"),
		"via", observer.TypeIdentityConflicted)
	countByType(counter("chunked_transfer_aborts_total", "Partial chunked transfers discarded, by event type and reason.", "side", "type", "reason"),
		"reason", observer.TypeChunkedUpdateAborted, observer.TypeChunkedSnapshotAborted, observer.TypeChunkedSyncAborted)
	m.chunkedTransfers = counter("chunked_transfers_total", "Chunked transfers sent, applied and acknowledged, by event type (chunked-update-sent, chunked-snapshot-applied, …).", "side", "type")
	m.chunkedBytes = counter("chunked_transfer_bytes_total", "Bytes of the chunked transfers sent, applied and acknowledged, by event type.", "side", "type")
	countBy(counter("schema_rearm_failures_total", "Schema re-arms that failed fatally, by code.", "side", "code"),
		"code", observer.TypeSchemaRearmFailed)
	countBy(counter("sync_diff_effects_total", "Single-frame sync diffs applied with a known effect on the state vector.", "side", "apply_effect"),
		"applyEffect", observer.TypeSyncDiffApplied)

	follow(gauge("connections_ready", "Connections currently in the ready state.", "side"),
		observer.TypeConnectionStateChanged, string(observer.ConnReady))
	follow(gauge("live_sessions", "Namespace sessions currently live: on the hub one per peer and namespace, on a peer one per target.", "side"),
		observer.TypeChannelStateChanged, string(observer.ChannelLive))
	follow(gauge("live_namespaces", "Deprecated: the same count as nomicore_live_sessions, kept for existing dashboards. "+
		"It counts sessions, not namespaces (on the hub, a namespace with three live peers counts 3).", "side"),
		observer.TypeChannelStateChanged, string(observer.ChannelLive))

	sizes := map[observer.Content]*prometheus.HistogramVec{
		observer.ContentUpdate:   histogram("update_bytes", "Sizes of live updates sent, applied and acknowledged (chunked: whole transfer).", byteBuckets, "side", "type"),
		observer.ContentSyncDiff: histogram("sync_diff_bytes", "Sizes of reconciliation diffs sent, applied and acknowledged.", byteBuckets, "side", "type"),
		observer.ContentSnapshot: histogram("snapshot_bytes", "Sizes of bootstrap snapshots sent, imported and acknowledged.", byteBuckets, "side", "type"),
	}
	for t, tm := range byName {
		tm.size = sizes[t.Content()]
	}

	byType := func(name, help string) durationMetric {
		return durationMetric{vec: histogram(name, help, latencyBuckets, "side", "type"), byType: true}
	}
	bySide := func(name, help string) durationMetric {
		return durationMetric{vec: histogram(name, help, latencyBuckets, "side")}
	}
	m.durations = [observer.NumDurations]durationMetric{
		observer.ApplyLatency:  byType("apply_latency_seconds", "Time from entering apply to apply settled, including sequencer wait."),
		observer.AckLatency:    byType("ack_latency_seconds", "Time from sending to receiving the acknowledgement."),
		observer.SendQueueWait: bySide("send_queue_seconds", "Time the oldest update of an outbound UPDATE frame waited in the send queue."),
		observer.LoopDelay:     bySide("event_loop_delay_seconds", "How late the liveness ping timer fired."),
		observer.BackoffDelay:  bySide("backoff_delay_seconds", "Reconnect backoff delays scheduled."),
	}
	m.stages = [4]*prometheus.HistogramVec{
		histogram("apply_queue_wait_seconds", "Apply stage: waiting for the namespace write sequencer slot.", latencyBuckets, "side", "type"),
		histogram("apply_protected_check_seconds", "Apply stage: protected-field check on a scratch copy.", latencyBuckets, "side", "type"),
		histogram("apply_live_apply_seconds", "Apply stage: applying to the live document.", latencyBuckets, "side", "type"),
		histogram("apply_dirty_notify_seconds", "Apply stage: dirty notification to persistence.", latencyBuckets, "side", "type"),
	}

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

func seconds(ms float64) float64 { return ms / 1000 }

// Observe records e: its count, its size and durations through the series bound
// for its side and type, then the counters and gauges that read its words.
func (m *Metrics) Observe(e observer.Event) {
	if e.Payload == nil {
		return
	}
	var ms observer.Measures
	e.Measure(&ms)
	tm := m.types[ms.TypeIndex]
	si := sideLabelIndex(e.Side)
	side := sideLabels[si]
	b := &tm.bound[si]

	b.events.get(func() prometheus.Counter { return m.events.WithLabelValues(side, tm.typ) }).Inc()
	if n, ok := ms.Size.Get(); ok && tm.size != nil {
		b.size.get(func() prometheus.Observer { return tm.size.WithLabelValues(side, tm.typ) }).Observe(float64(n))
		if tm.chunked {
			b.transfers.get(func() prometheus.Counter { return m.chunkedTransfers.WithLabelValues(side, tm.typ) }).Inc()
			b.transferBytes.get(func() prometheus.Counter { return m.chunkedBytes.WithLabelValues(side, tm.typ) }).Add(float64(n))
		}
	}
	if v, ok := ms.Latency.Get(); ok {
		dm := m.durations[ms.Timed]
		b.durations[ms.Timed].get(func() prometheus.Observer { return dm.series(side, tm.typ) }).Observe(seconds(v))
	}
	if s, ok := ms.Stages.Get(); ok {
		for i, v := range [4]float64{s.QueueWaitMs, s.ProtectedCheckMs, s.LiveApplyMs, s.DirtyNotifyMs} {
			b.stages[i].get(func() prometheus.Observer { return m.stages[i].WithLabelValues(side, tm.typ) }).Observe(seconds(v))
		}
	}
	if len(tm.counts) > 0 || len(tm.gauges) > 0 {
		var buf [8]observer.Word
		words := e.Words(buf[:0])
		for _, c := range tm.counts {
			c.count(side, tm.typ, words)
		}
		for _, g := range tm.gauges {
			g.follow(side, words)
		}
	}
}

func (d durationMetric) series(side, typ string) prometheus.Observer {
	if d.byType {
		return d.vec.WithLabelValues(side, typ)
	}
	return d.vec.WithLabelValues(side)
}

// count counts one event whose words are words.
func (c wordCounter) count(side, typ string, words []observer.Word) {
	var value string
	found, matches := false, c.when.Key == ""
	for _, w := range words {
		switch w.Key {
		case c.key:
			value, found = label(w), true
		case c.when.Key:
			matches = w.Value == c.when.Value
		}
	}
	switch {
	case !found || !matches:
	case c.byType:
		c.vec.WithLabelValues(side, typ, value).Inc()
	default:
		c.vec.WithLabelValues(side, value).Inc()
	}
}

// follow moves the gauge by one state change: down when it leaves the state, up
// when it enters it.
func (g stateGauge) follow(side string, words []observer.Word) {
	for _, w := range words {
		if w.Value != g.state {
			continue
		}
		switch w.Key {
		case "from":
			g.vec.WithLabelValues(side).Dec()
		case "to":
			g.vec.WithLabelValues(side).Inc()
		}
	}
}

// label is a word's value when it is in its closed vocabulary, else "invalid",
// keeping label values bounded even if a layer emits an unchecked value.
func label(w observer.Word) string {
	if w.Known {
		return w.Value
	}
	return "invalid"
}
