package yws

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the editor endpoint's Prometheus series (labels: side, type, reason only;
// never a namespace, a client name or a token). A nil *Metrics counts nothing.
type Metrics struct {
	connections   prometheus.Gauge
	awareness     prometheus.Gauge
	msgsIn        *prometheus.CounterVec
	bytesIn       *prometheus.CounterVec
	msgsOut       prometheus.Counter
	bytesOut      prometheus.Counter
	refusedUpd    *prometheus.CounterVec
	refusedConn   *prometheus.CounterVec
	closes        *prometheus.CounterVec
	awarenessDrop prometheus.Counter
	limitCloses   *prometheus.CounterVec
}

// NewMetrics registers the series on reg for side ("hub" or "peer").
func NewMetrics(reg prometheus.Registerer, side string) (*Metrics, error) {
	l := prometheus.Labels{"side": side}
	m := &Metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nomicore_client_connections", ConstLabels: l,
			Help: "Open editor connections (y-websocket connections and Hocuspocus sockets)."}),
		awareness: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nomicore_client_awareness_states", ConstLabels: l,
			Help: "Awareness states held for the editors of this node's namespaces: their own and, with the presence relay, those of other nodes' editors."}),
		msgsIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_client_messages_received_total", ConstLabels: l,
			Help: "Messages received from editors, by type (sync-step1, sync-step2, update, awareness, query-awareness, stateless; of Hocuspocus sockets also auth, close, ping, pong)."}, []string{"type"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_client_bytes_received_total", ConstLabels: l,
			Help: "Bytes of the messages received from editors, by type."}, []string{"type"}),
		msgsOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "nomicore_client_messages_sent_total", ConstLabels: l,
			Help: "Messages sent to editors."}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "nomicore_client_bytes_sent_total", ConstLabels: l,
			Help: "Bytes of the messages sent to editors."}),
		refusedUpd: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_client_refused_updates_total", ConstLabels: l,
			Help: "Editor updates not applied, by reason (read-only, protected-meta, after-refused, too-large)."}, []string{"reason"}),
		refusedConn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_client_rejections_total", ConstLabels: l,
			Help: "Editor connections refused before the upgrade, and Hocuspocus documents refused at their authentication, by reason."}, []string{"reason"}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_client_disconnects_total", ConstLabels: l,
			Help: "Editor connections ended, by reason."}, []string{"reason"}),
		awarenessDrop: prometheus.NewCounter(prometheus.CounterOpts{Name: "nomicore_client_awareness_dropped_total", ConstLabels: l,
			Help: "Awareness entries dropped by the bounds (states per namespace, states per connection)."}),
		limitCloses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_client_limit_closes_total", ConstLabels: l,
			Help: "Editor connections closed (1008) for going over a limit, by limit (connections-per-user, messages-per-second, bytes-per-second, awareness-updates-per-second, awareness-state-bytes)."}, []string{"limit"}),
	}
	for _, name := range limitNames {
		m.limitCloses.WithLabelValues(name) // every limit's series, at 0 until it is met
	}
	for _, c := range []prometheus.Collector{m.connections, m.awareness, m.msgsIn, m.bytesIn, m.msgsOut, m.bytesOut,
		m.refusedUpd, m.refusedConn, m.closes, m.awarenessDrop, m.limitCloses} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) connected(d int) {
	if m != nil {
		m.connections.Add(float64(d))
	}
}

func (m *Metrics) awarenessChanged(d int) {
	if m != nil && d != 0 {
		m.awareness.Add(float64(d))
	}
}

func (m *Metrics) awarenessDropped(n int) {
	if m != nil {
		m.awarenessDrop.Add(float64(n))
	}
}

func (m *Metrics) received(typ string, n int) {
	if m != nil {
		m.msgsIn.WithLabelValues(typ).Inc()
		m.bytesIn.WithLabelValues(typ).Add(float64(n))
	}
}

func (m *Metrics) sent(n int) {
	if m != nil {
		m.msgsOut.Inc()
		m.bytesOut.Add(float64(n))
	}
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusedUpd.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) refusedConnect(reason string) {
	if m != nil {
		m.refusedConn.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) closed(reason string) {
	if m != nil {
		m.closes.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) limitClosed(limit string) {
	if m != nil {
		m.limitCloses.WithLabelValues(limit).Inc()
	}
}
