package node

import (
	"context"
	"log/slog"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/timeline"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/promobs"
	"github.com/nomicore/nomicore/observer/slogobs"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/ws"
)

// Observability is a binary's observer (docs/protocol.md#observability): every event goes to
// the log (slogobs: one line per event, per-frame events aggregated into summaries — and, at
// --log-level debug, also one line each) and to Prometheus metrics (promobs) served on the
// admin listener's /metrics from a registry of its own (only nomicore_ series).
type Observability struct {
	Side     observer.Side
	Registry *prometheus.Registry
	Metrics  *promobs.Metrics
	Log      *slogobs.Logger
	// Timeline keeps the recent events and traffic totals for the status routes and the
	// dashboard.
	Timeline *timeline.Timeline
	// Observer feeds all three; pass it to the replication layer.
	Observer observer.Observer

	tokenReloads *prometheus.CounterVec
}

// NewObservability builds the observer of one side.
func NewObservability(log *slog.Logger, side observer.Side) (*Observability, error) {
	reg := prometheus.NewRegistry()
	m, err := promobs.New(reg)
	if err != nil {
		return nil, err
	}
	l := slogobs.New(log, slogobs.Options{})
	tl := timeline.New(timeline.Options{})
	o := &Observability{Side: side, Registry: reg, Metrics: m, Log: l, Timeline: tl,
		Observer: observer.Multi(l, m, observer.ObserverFunc(tl.Observe))}
	if log.Enabled(context.Background(), slog.LevelDebug) {
		// At debug, every per-frame event (an update sent, applied or acknowledged, a sync
		// diff, …) is also one line of its own; the summaries go on.
		o.Observer = observer.Multi(l, m, observer.ObserverFunc(tl.Observe), observer.ObserverFunc(func(e observer.Event) {
			if e.Type().PerFrame() {
				log.LogAttrs(context.Background(), slog.LevelDebug, string(e.Type()), e.Attrs()...)
			}
		}))
	}
	o.tokenReloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_token_reloads_total",
		Help: "Reloads of the hub's tokens file, by outcome (changed, failed)."}, []string{"side", "reason"})
	if err := reg.Register(o.tokenReloads); err != nil {
		return nil, err
	}
	return o, nil
}

// ReplicationLoad installs the gauges of queued bytes and in-flight updates, read from the
// replication layer at scrape time (ws.Hub.Load or ws.Peer.Load).
//
// With them go two gauges for leak checks: nomicore_connections_open, the replication
// connections open (from the upgrade until their goroutines have exited), and
// nomicore_goroutines, the process's goroutines.
func (o *Observability) ReplicationLoad(load func() ws.Load) error {
	o.Metrics.SetQueueStats(o.Side, func() (queuedBytes, inFlight float64) {
		l := load()
		return float64(l.QueuedBytes), float64(l.InFlight)
	})
	side := prometheus.Labels{"side": string(o.Side)}
	conns := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nomicore_connections_open", ConstLabels: side,
		Help: "Replication connections open: from the upgrade until every goroutine of the connection has exited."},
		func() float64 { return float64(load().Connections) })
	gs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nomicore_goroutines", ConstLabels: side,
		Help: "Goroutines of this process (a count that keeps growing while the load does not is a leak)."},
		func() float64 { return float64(runtime.NumGoroutine()) })
	for _, c := range []prometheus.Collector{conns, gs} {
		if err := o.Registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Assemblies installs the gauge of chunked transfers being received, read from the namespace
// layer at scrape time (namespace.Hub.Assemblies or TargetController.Assemblies).
func (o *Observability) Assemblies(n func() int64) {
	o.Metrics.SetAssemblies(o.Side, func() float64 { return float64(n()) })
}

// Handler serves the metrics (Prometheus text).
func (o *Observability) Handler() http.Handler {
	return promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// TokenReload counts a tokens file reload outcome.
func (o *Observability) TokenReload(outcome string) {
	o.tokenReloads.WithLabelValues(string(o.Side), outcome).Inc()
}

// RunFlush writes the per-frame summaries every interval (measured by clk) until ctx ends,
// then once more.
func (o *Observability) RunFlush(ctx context.Context, clk clock.Clock, every time.Duration) {
	t := clock.NewTicker(clk, every)
	defer func() { t.Stop(); o.Log.Flush() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			o.Log.Flush()
		}
	}
}

// RegisterStore exposes the store's and the registry's counters (side label only:
// docs/protocol.md#adapters).
func (o *Observability) RegisterStore(store persistence.Catalog, reg *registry.Registry) error {
	return o.Registry.Register(&storeCollector{side: string(o.Side), store: store, reg: reg})
}

var (
	descQueued       = prometheus.NewDesc("nomicore_store_queued_appends", "Appends waiting for the group committer.", []string{"side"}, nil)
	descQueuedBytes  = prometheus.NewDesc("nomicore_store_queued_bytes", "Bytes of the appends waiting for the group committer.", []string{"side"}, nil)
	descCommits      = prometheus.NewDesc("nomicore_store_commits_total", "Group-commit transactions that succeeded.", []string{"side"}, nil)
	descCommitted    = prometheus.NewDesc("nomicore_store_committed_appends_total", "Appends made durable.", []string{"side"}, nil)
	descCommitErrors = prometheus.NewDesc("nomicore_store_commit_errors_total", "Failed commit attempts (the store retries; persistence is degraded while they fail).", []string{"side"}, nil)
	descBackpressure = prometheus.NewDesc("nomicore_store_backpressure_total", "Appends refused because the commit queue was full.", []string{"side"}, nil)
	descCompactions  = prometheus.NewDesc("nomicore_store_compactions_total", "Update logs folded into snapshots.", []string{"side"}, nil)
	descHealthy      = prometheus.NewDesc("nomicore_store_healthy", "1 when the last commit succeeded, 0 while persistence is degraded (writes refused).", []string{"side"}, nil)
	descLoaded       = prometheus.NewDesc("nomicore_namespaces_loaded", "Namespaces whose document is loaded in memory.", []string{"side"}, nil)
	descSaveFailures = prometheus.NewDesc("nomicore_snapshot_save_failures_total",
		"Snapshots of namespaces with unsaved changes that the store refused, by reason: transient (tried again until saved) or "+
			"permanent (not tried again: the namespace refuses writes until it is loaded again; the log names the cause).",
		[]string{"side", "reason"}, nil)
)

type storeCollector struct {
	side  string
	store persistence.Catalog
	reg   *registry.Registry
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueued, descQueuedBytes, descCommits, descCommitted, descCommitErrors,
		descBackpressure, descCompactions, descHealthy, descLoaded, descSaveFailures} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.store.Stats()
	healthy := 0.0
	if c.store.Healthy() {
		healthy = 1
	}
	for _, m := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{
		{descQueued, prometheus.GaugeValue, float64(s.Queued)},
		{descQueuedBytes, prometheus.GaugeValue, float64(s.QueuedBytes)},
		{descCommits, prometheus.CounterValue, float64(s.Commits)},
		{descCommitted, prometheus.CounterValue, float64(s.Committed)},
		{descCommitErrors, prometheus.CounterValue, float64(s.CommitErrors)},
		{descBackpressure, prometheus.CounterValue, float64(s.Backpressure)},
		{descCompactions, prometheus.CounterValue, float64(s.Compactions)},
		{descHealthy, prometheus.GaugeValue, healthy},
		{descLoaded, prometheus.GaugeValue, float64(c.reg.Loaded())},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, m.t, m.v, c.side)
	}
	f := c.reg.SaveFailures()
	ch <- prometheus.MustNewConstMetric(descSaveFailures, prometheus.CounterValue, float64(f.Transient), c.side, "transient")
	ch <- prometheus.MustNewConstMetric(descSaveFailures, prometheus.CounterValue, float64(f.Permanent), c.side, "permanent")
}
