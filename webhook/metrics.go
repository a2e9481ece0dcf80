package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the webhook series of /metrics (no endpoint label: an endpoint's own state is
// on the dashboard and in GET /v1/webhooks).
type Metrics struct {
	deliveries *prometheus.CounterVec
	latency    prometheus.Histogram
}

// NewMetrics registers the series on reg; d (set later with Watch) gives the gauges.
func NewMetrics(reg prometheus.Registerer, d func() *Deliverer) (*Metrics, error) {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_webhook_deliveries_total",
			Help: "Webhook delivery attempts, by outcome (reason: delivered, failed — a failed one is retried)."}, []string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nomicore_webhook_delivery_latency_seconds",
			Help:    "From a change to the endpoint's 2xx for it (debounce, retries and a receiver that was down included).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 2.5, 3, 5, 10, 30, 60, 300, 1800, 3600}}),
	}
	gauge := func(name, help string, f func(s Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			var v float64
			if dd := d(); dd != nil {
				for _, s := range dd.Status() {
					v += f(s)
				}
			}
			return v
		})
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.latency,
		gauge("nomicore_webhook_endpoints", "Webhook endpoints configured.", func(Status) float64 { return 1 }),
		gauge("nomicore_webhook_endpoints_failing", "Webhook endpoints whose last attempt failed (retrying).", func(s Status) float64 {
			if s.State == "retrying" {
				return 1
			}
			return 0
		}),
		gauge("nomicore_webhook_pending_changes", "Changes read from the feed and not yet delivered, over every endpoint.", func(s Status) float64 {
			return float64(s.Pending)
		}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Observe is the Options.Observe of a Deliverer.
func (m *Metrics) Observe(o Outcome) {
	if !o.Delivered {
		m.deliveries.WithLabelValues("failed").Inc()
		return
	}
	m.deliveries.WithLabelValues("delivered").Inc()
	m.latency.Observe(o.Latency.Seconds())
}
