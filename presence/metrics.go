package presence

import "github.com/prometheus/client_golang/prometheus"

// Reasons a presence entry is dropped (the reason label of nomicore_presence_dropped_total).
const (
	// DropSuperseded: a newer state of the same client replaced it before it went out (the
	// relay sends each client's latest state only).
	DropSuperseded = "superseded"
	// DropTooLarge: a state received from another node over the editors' state size bound.
	DropTooLarge = "too-large"
	// DropBounds: a state received from another node beyond the namespace's bound of states.
	DropBounds = "bounds"
	// DropMalformed: a message from another node that does not decode.
	DropMalformed = "malformed"
	// DropSendFailed: a message that could not be handed to the transport (the connection
	// is down); the states go out with the next change or renewal.
	DropSendFailed = "send-failed"
	// DropRate: a PRESENCE frame beyond what one connection may send per second for one
	// namespace.
	DropRate = "rate"
)

var dropReasons = []string{DropSuperseded, DropTooLarge, DropBounds, DropMalformed, DropSendFailed, DropRate}

// Metrics are the presence relay's Prometheus series. A nil *Metrics counts nothing.
type Metrics struct {
	relayed *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	dropped *prometheus.CounterVec
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_presence_relayed_total",
			Help: "Awareness entries (one editor's state, or its removal) sent to or received from other nodes, by direction (out, in)."},
			[]string{"direction"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_presence_relayed_bytes_total",
			Help: "Bytes of the presence messages sent to or received from other nodes, by direction (out, in)."},
			[]string{"direction"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_presence_dropped_total",
			Help: "Awareness entries not relayed, by reason (superseded, too-large, bounds, malformed, send-failed)."},
			[]string{"reason"}),
	}
	for _, d := range []string{"out", "in"} {
		m.relayed.WithLabelValues(d)
		m.bytes.WithLabelValues(d)
	}
	for _, r := range dropReasons {
		m.dropped.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.relayed, m.bytes, m.dropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// out counts n entries sent in a message of size bytes.
func (m *Metrics) out(n, size int) {
	if m != nil {
		m.relayed.WithLabelValues("out").Add(float64(n))
		m.bytes.WithLabelValues("out").Add(float64(size))
	}
}

// in counts n entries taken from a message of size bytes.
func (m *Metrics) in(n, size int) {
	if m != nil {
		m.relayed.WithLabelValues("in").Add(float64(n))
		m.bytes.WithLabelValues("in").Add(float64(size))
	}
}

func (m *Metrics) drop(reason string, n int) {
	if m != nil && n > 0 {
		m.dropped.WithLabelValues(reason).Add(float64(n))
	}
}
