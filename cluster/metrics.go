package cluster

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the node's Prometheus series, all named nomicore_cluster_… and none labelled
// by namespace (docs/protocol.md#adapters): the per-namespace consumer lag is aggregated —
// its sum, its maximum, and how many followed namespaces are behind by more than lagBehind
// records.
type Metrics struct {
	publishSeconds prometheus.Histogram
	publishBatch   prometheus.Histogram
	publishErrors  prometheus.Counter
	quorumChanges  prometheus.Counter
	compactions    *prometheus.CounterVec // outcome: done, up-to-date, leased-elsewhere, put-off, failed
	leasesHeld     prometheus.Gauge
	done           atomic.Uint64 // compactions done, for Store.Stats
}

// lagBehind is the lag above which a followed namespace counts as behind.
const lagBehind = 100

func newMetrics() *Metrics {
	return &Metrics{
		publishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nomicore_cluster_publish_seconds",
			Help:    "Time from publishing a record to the log stream's acknowledgement (stored on a quorum).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		publishBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nomicore_cluster_publish_batch_records",
			Help:    "Records per message published to a log stream (the updates of one namespace that waited while its earlier messages were in flight).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nomicore_cluster_publish_errors_total",
			Help: "Records that could not be published (no quorum, deadline, full queue); the writer got an error.",
		}),
		quorumChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nomicore_cluster_quorum_changes_total",
			Help: "Times this node lost or regained the cluster quorum.",
		}),
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nomicore_cluster_compactions_total",
			Help: "Compaction attempts of namespace logs started by this node, by outcome (done, up-to-date, leased-elsewhere, put-off: the document grew larger than this node knew and the log is still small beside it, failed).",
		}, []string{"outcome"}),
		leasesHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nomicore_cluster_compaction_leases_held",
			Help: "Compaction leases this node holds now (at most one node per namespace).",
		}),
	}
}

func (m *Metrics) compactionDone() {
	m.compactions.WithLabelValues("done").Inc()
	m.done.Add(1)
}

var (
	descQuorum   = prometheus.NewDesc("nomicore_cluster_quorum", "1 while this node has the cluster quorum (writes accepted), else 0.", nil, nil)
	descFollowed = prometheus.NewDesc("nomicore_cluster_followed_namespaces", "Namespace logs this node follows (namespaces it has loaded).", nil, nil)
	descLagSum   = prometheus.NewDesc("nomicore_cluster_consumer_lag_records", "Records in the logs of the followed namespaces not yet handed to the sequencer, summed.", nil, nil)
	descLagMax   = prometheus.NewDesc("nomicore_cluster_consumer_lag_max_records", "The largest lag of one followed namespace, in records.", nil, nil)
	descBehind   = prometheus.NewDesc("nomicore_cluster_namespaces_behind", "Followed namespaces more than 100 records behind their log.", nil, nil)
)

// RegisterMetrics adds the node's metrics to r: publish latencies and errors, quorum
// changes, compactions and compaction leases, and the quorum and the followers' lag read at
// scrape time.
func (n *Node) RegisterMetrics(r prometheus.Registerer) error {
	m := n.metrics
	for _, c := range []prometheus.Collector{m.publishSeconds, m.publishBatch, m.publishErrors, m.quorumChanges, m.compactions, m.leasesHeld, &lagCollector{n}} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// lagCollector reads the quorum and the followers' lag at scrape time.
type lagCollector struct{ n *Node }

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQuorum, descFollowed, descLagSum, descLagMax, descBehind} {
		ch <- d
	}
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	var sum, maxLag, behind, followed float64
	c.n.logsMu.Lock()
	for l := range c.n.logs {
		lag := float64(l.lag.Load())
		followed++
		sum += lag
		maxLag = max(maxLag, lag)
		if lag > lagBehind {
			behind++
		}
	}
	c.n.logsMu.Unlock()
	quorum := 0.0
	if c.n.Healthy() {
		quorum = 1
	}
	ch <- prometheus.MustNewConstMetric(descQuorum, prometheus.GaugeValue, quorum)
	ch <- prometheus.MustNewConstMetric(descFollowed, prometheus.GaugeValue, followed)
	ch <- prometheus.MustNewConstMetric(descLagSum, prometheus.GaugeValue, sum)
	ch <- prometheus.MustNewConstMetric(descLagMax, prometheus.GaugeValue, maxLag)
	ch <- prometheus.MustNewConstMetric(descBehind, prometheus.GaugeValue, behind)
}
