package promobs

import (
	"sync/atomic"

	"github.com/nomicore/nomicore/observer"
	"github.com/prometheus/client_golang/prometheus"
)

// This file is the per-frame path: an event per UPDATE sent, applied or acknowledged, per
// Step2, per watermark crossing. (Chunked transfers, one event per transfer and with
// counters of their own, take the label path in promobs.go.) Their series are bound once, at the
// first event of each side and type, and kept (lazy): later events touch no label map and
// allocate nothing. A series is created at its first use, as the label path would create
// it, so the exposition is the same.

// frameKind numbers the per-frame event types (observer.Type.PerFrame) but the chunked ones.
type frameKind uint8

const (
	fkLoopDelay frameKind = iota
	fkSyncStep2Sent
	fkSyncDiffApplied
	fkUpdateSent
	fkUpdateApplied
	fkUpdateAcked
	fkDegradedBypassApplied
	fkSendPaused
	fkSendResumed
	numFrameKinds
)

// lazy holds a series bound at its first use.
type lazy[T any] struct{ p atomic.Pointer[T] }

func (l *lazy[T]) get(bind func() T) T {
	if p := l.p.Load(); p != nil {
		return *p
	}
	v := bind()
	l.p.CompareAndSwap(nil, &v) // a racing binder found the same child
	return *l.p.Load()
}

// frameSeries are the series one per-frame type of one side records into.
type frameSeries struct {
	events  lazy[prometheus.Counter]
	size    lazy[prometheus.Observer]
	latency lazy[prometheus.Observer] // apply or acknowledgement latency
	extra   lazy[prometheus.Observer] // send queue wait, event loop delay
	stages  [4]lazy[prometheus.Observer]
}

// observeFrame records a per-frame event through its bound series; false for any other
// event.
func (m *Metrics) observeFrame(si int, side string, e observer.Event) bool {
	var (
		kind    frameKind
		size    *prometheus.HistogramVec
		n       float64
		lat     *prometheus.HistogramVec
		latMs   observer.Opt[float64]
		stages  observer.Opt[observer.Stages]
		extra   *prometheus.HistogramVec
		extraMs float64
		hasX    bool
	)
	switch p := e.Payload.(type) {
	case observer.EventLoopDelaySampled:
		kind, extra, extraMs, hasX = fkLoopDelay, m.loopDelay, p.DelayMs, true
	case observer.SyncStep2Sent:
		kind, size, n = fkSyncStep2Sent, m.syncBytes, float64(p.Bytes)
	case observer.SyncDiffApplied:
		kind, size, n, lat, latMs, stages = fkSyncDiffApplied, m.syncBytes, float64(p.Bytes), m.applyLatency, p.ApplyLatencyMs, p.Stages
		if g, ok := p.Effect.Get(); ok {
			// A handful of values, once per reconciliation diff: the label path.
			m.syncDiffEffects.WithLabelValues(side, string(g.ApplyEffect())).Inc()
		}
	case observer.UpdateSent:
		kind, size, n = fkUpdateSent, m.updateBytes, float64(p.Bytes)
		if v, ok := p.SendQueueMs.Get(); ok {
			extra, extraMs, hasX = m.sendQueue, v, true
		}
	case observer.UpdateApplied:
		kind, size, n, lat, latMs, stages = fkUpdateApplied, m.updateBytes, float64(p.Bytes), m.applyLatency, p.ApplyLatencyMs, p.Stages
	case observer.UpdateAcked:
		kind, size, n, lat, latMs = fkUpdateAcked, m.updateBytes, float64(p.Bytes), m.ackLatency, p.AckLatencyMs
	case observer.DegradedBypassApplied:
		kind, size, n = fkDegradedBypassApplied, m.updateBytes, float64(p.Bytes)
	case observer.SendPaused:
		kind = fkSendPaused
	case observer.SendResumed:
		kind = fkSendResumed
	default:
		return false
	}
	fs := &m.frames[si][kind]
	typ := func() string { return string(e.Type()) }
	fs.events.get(func() prometheus.Counter { return m.events.WithLabelValues(side, typ()) }).Inc()
	if size != nil {
		fs.size.get(func() prometheus.Observer { return size.WithLabelValues(side, typ()) }).Observe(n)
	}
	if v, ok := latMs.Get(); ok && lat != nil {
		fs.latency.get(func() prometheus.Observer { return lat.WithLabelValues(side, typ()) }).Observe(seconds(v))
	}
	if hasX {
		fs.extra.get(func() prometheus.Observer { return extra.WithLabelValues(side) }).Observe(seconds(extraMs))
	}
	if s, ok := stages.Get(); ok {
		for i, h := range [4]*prometheus.HistogramVec{m.stageQueue, m.stageCheck, m.stageApply, m.stageDirty} {
			v := [4]float64{s.QueueWaitMs, s.ProtectedCheckMs, s.LiveApplyMs, s.DirtyNotifyMs}[i]
			fs.stages[i].get(func() prometheus.Observer { return h.WithLabelValues(side, typ()) }).Observe(seconds(v))
		}
	}
	return true
}
