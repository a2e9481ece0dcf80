// Package slogobs writes replication events to a log/slog logger as structured
// lines, for the JSON logs of the hub and peer binaries (the log policy of
// docs/protocol.md#adapters). New wraps a *slog.Logger; the returned Logger is
// the observer.Observer to attach to the emitters.
//
// Policy. Every event that is not per-frame (state changes, failures, resyncs,
// drops, aborts, schema re-arms, backoff, goaway, auth rejections) is one line:
// message = the event type, attributes = the event's keys (type, side, then the
// payload's keys; absent optionals stay absent). Events that report a failure
// (observer.Type.Failure) log at Warn, the rest at Info. Per-frame events (observer.Type.PerFrame: update-sent/
// applied/acked, sync-step2-sent, sync-diff-applied, the chunked sent/applied/
// acked events, degraded-bypass-applied, send-paused/resumed,
// event-loop-delay-sampled) are never logged one by one: they are counted per
// (side, type), with their total bytes and maximum latency, and written as one
// "frame-summary" line per (side, type) every SummaryEvery per-frame events, or
// whenever the owner calls Flush — typically from its own ticker and at shutdown.
//
// Events carry no bytes, tokens, owners or free text, so neither do the lines. A
// Logger is safe for concurrent use and starts no goroutines.
package slogobs

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/nomicore/nomicore/observer"
)

// DefaultSummaryEvery is the per-frame event count that triggers a summary flush
// when Options.SummaryEvery is zero.
const DefaultSummaryEvery = 1000

// SummaryMessage is the message of per-frame summary lines.
const SummaryMessage = "frame-summary"

// Options configure a Logger.
type Options struct {
	// SummaryEvery is how many per-frame events are aggregated before the
	// summary lines are written on their own (0: DefaultSummaryEvery).
	SummaryEvery int
}

// Logger is an observer.Observer that writes events to a slog.Logger.
type Logger struct {
	log   *slog.Logger
	every int

	mu      sync.Mutex               // guards the fields below
	window  map[frameKey]*frameStats // per-frame aggregates since the last flush
	pending int                      // per-frame events in window
}

type frameKey struct {
	side observer.Side
	t    observer.Type
}

type frameStats struct {
	count int
	bytes int
	hasB  bool
	maxMs float64
	hasMs bool
}

// New returns a Logger writing to log.
func New(log *slog.Logger, opts Options) *Logger {
	every := opts.SummaryEvery
	if every <= 0 {
		every = DefaultSummaryEvery
	}
	return &Logger{log: log, every: every, window: map[frameKey]*frameStats{}}
}

// Observe logs e (one line) or adds it to the per-frame window.
func (l *Logger) Observe(e observer.Event) {
	var m observer.Measures
	e.Measure(&m)
	i := m.TypeIndex // -1 for an event without a payload, logged as a line
	if i < 0 || !typeFacts[i].perFrame {
		level := slog.LevelInfo
		if i >= 0 && typeFacts[i].failure {
			level = slog.LevelWarn
		}
		if l.log.Enabled(context.Background(), level) {
			l.log.LogAttrs(context.Background(), level, string(e.Type()), e.Attrs()...)
		}
		return
	}
	t := e.Type()
	bytes, hasB := m.Size.Get()
	ms, hasMs := m.Latency.Get() // apply, ack, send-queue or loop: per-frame events carry no other
	l.mu.Lock()
	k := frameKey{e.Side, t}
	s := l.window[k]
	if s == nil {
		s = &frameStats{}
		l.window[k] = s
	}
	s.count++
	if hasB {
		s.bytes += bytes
		s.hasB = true
	}
	if hasMs && (!s.hasMs || ms > s.maxMs) {
		s.maxMs, s.hasMs = ms, true
	}
	l.pending++
	var flush map[frameKey]*frameStats
	if l.pending >= l.every {
		flush = l.takeLocked()
	}
	l.mu.Unlock()
	l.write(flush)
}

// Flush writes the summary lines of the per-frame events aggregated so far and
// starts a new window. It writes nothing when the window is empty.
func (l *Logger) Flush() {
	l.mu.Lock()
	flush := l.takeLocked()
	l.mu.Unlock()
	l.write(flush)
}

func (l *Logger) takeLocked() map[frameKey]*frameStats {
	if l.pending == 0 {
		return nil
	}
	w := l.window
	l.window = map[frameKey]*frameStats{}
	l.pending = 0
	return w
}

// write logs one summary line per (side, type), in the contract's type order, hub
// first.
func (l *Logger) write(window map[frameKey]*frameStats) {
	if len(window) == 0 {
		return
	}
	keys := make([]frameKey, 0, len(window))
	for k := range window {
		keys = append(keys, k)
	}
	order := observer.Types()
	slices.SortFunc(keys, func(a, b frameKey) int {
		if d := slices.Index(order, a.t) - slices.Index(order, b.t); d != 0 {
			return d
		}
		return slices.Index(observer.Sides(), a.side) - slices.Index(observer.Sides(), b.side)
	})
	for _, k := range keys {
		s := window[k]
		attrs := []slog.Attr{slog.String("type", string(k.t)), slog.String("side", string(k.side)), slog.Int("count", s.count)}
		if s.hasB {
			attrs = append(attrs, slog.Int("bytesTotal", s.bytes))
		}
		if s.hasMs {
			attrs = append(attrs, slog.Float64("maxMs", s.maxMs))
		}
		l.log.LogAttrs(context.Background(), slog.LevelInfo, SummaryMessage, attrs...)
	}
}

// typeFacts are what the logger needs of each event type, in the order of
// observer.Types, which Measures.TypeIndex indexes.
var typeFacts = func() []struct{ perFrame, failure bool } {
	types := observer.Types()
	facts := make([]struct{ perFrame, failure bool }, len(types))
	for i, t := range types {
		facts[i].perFrame, facts[i].failure = t.PerFrame(), t.Failure()
	}
	return facts
}()
