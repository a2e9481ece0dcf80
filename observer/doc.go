// Package observer is how the replication layers report what happens — connections
// changing state, namespaces bootstrapping, updates sent, applied and
// acknowledged, errors, resyncs — without depending on any logging or metrics
// library. A layer emits typed events through an Emitter; an Observer receives
// them. The hub and peer binaries attach two observers: slogobs writes the events
// as JSON log lines and promobs turns them into Prometheus metrics.
// observertest records and checks events in tests. The package imports nothing of
// this module.
//
// The vocabulary is fixed by the protocol (docs/protocol.md#observability): 36
// event types, each with its documented keys, the closed sets of values those
// keys may take, and safety rules — events carry identifiers, stable codes,
// sizes, latencies and digests, never document bytes, tokens, owners or free
// text, so logs and metrics built on them cannot leak data or grow without
// bound.
//
// # Events
//
// Each event type is one struct (UpdateApplied, NamespaceFailed, …) whose fields
// are its documented keys. Optional keys are Opt fields whose zero value is
// absent; the conditional groups are optional structs that render all their keys
// or none (SyncDiffApplied.Effect, the Stages of the two apply events,
// ResyncRequired.SendFailure). Absent means absent: an unknown value is never
// rendered as zero. An Event wraps a payload with the emitting Side; its Attrs —
// `type`, `side`, then the payload keys in documented order — are the single
// source for JSON (MarshalJSON) and slog (LogValue) renderings. Event.Validate
// checks the closed vocabularies, the side that may emit each type, identifier
// grammars and the group rules. Codes from the wire are folded into the closed
// sets (FoldConnectionCode, FoldNamespaceCode, FoldGoAwayReason), so a remote
// cannot invent new values.
//
// Each event type describes its keys once — name, kind, safety rule and what it
// measures — and every use walks that description: Attrs, Validate, and what
// the sinks aggregate, Event.Measure (size, latency, apply stages) and
// Event.Words (the closed-vocabulary values to count and label by). The type
// itself says who emits it, whether it is per-frame, whether it reports a
// failure, what its size measures and whether it is a step of a chunked
// transfer (Type.EmittedBy, PerFrame, Failure, Content, Chunked). So slogobs
// and promobs hold no code per event type.
//
// # Emitting
//
// A layer holds an *Emitter (NewEmitter(side, observer, clock)) and guards event
// construction with Enabled, so that without an observer nothing is built and the
// clock is never read:
//
//	t0 := em.Now() // absent without observer, clock, or when the clock panics
//	…
//	if em.Enabled() {
//		em.Emit(observer.UpdateApplied{
//			ConnectionID:   observer.Some(connID),
//			NamespaceID:    ns,
//			Bytes:          len(update),
//			ApplyLatencyMs: em.SinceMs(t0),
//			Sequence:       seq,
//		})
//	}
//
// # Concurrency
//
// An Emitter is immutable and safe for concurrent use. Observers are called
// synchronously on the emitting goroutine — for a hub or peer, many connection
// goroutines at once — so they must be safe for concurrent use and must not
// block; a panic inside one is recovered and ignored, and observation never
// changes protocol state. A clock that panics counts as no clock.
package observer
