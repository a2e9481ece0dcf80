package promobs

import (
	"sync/atomic"

	"github.com/nomicore/nomicore/observer"
	"github.com/prometheus/client_golang/prometheus"
)

// The series labelled by side and event type alone — an event's count, its size,
// its latency, its apply stages, the chunked transfer counters — are bound once, at the first
// event of each side and type, and kept: later events, one per UPDATE sent,
// applied or acknowledged, touch no label map and allocate nothing. A series is
// created at its first use, as WithLabelValues would create it, so the exposition
// is the same.

// The side label values: an event's side when it is valid, "invalid" otherwise.
const numSideLabels = 3

var sideLabels = [numSideLabels]string{string(observer.SideHub), string(observer.SidePeer), "invalid"}

func sideLabelIndex(s observer.Side) int {
	if i, ok := sideIndex(s); ok {
		return i
	}
	return 2
}

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

// boundSeries are the series one event type of one side records into.
type boundSeries struct {
	events        lazy[prometheus.Counter]
	size          lazy[prometheus.Observer]
	transfers     lazy[prometheus.Counter]
	transferBytes lazy[prometheus.Counter]
	durations     [observer.NumDurations]lazy[prometheus.Observer]
	stages        [4]lazy[prometheus.Observer]
}
