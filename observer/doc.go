// Package observer is the observability seam of §23: the vocabulary of 36 event
// types the replication layers report, the stable code unions and their folding
// (§23.2), the safe-field rules (§23.3), and synchronous, panic-isolated delivery
// with clock-throw folding (§23.4). It imports nothing of this module; adapters
// live in subpackages (slogobs for JSON logs, promobs for Prometheus) and
// observertest helps tests assert what was emitted.
//
// # Events
//
// Each §23.1 type is one struct (UpdateApplied, NamespaceFailed, …) whose fields
// are its documented keys. Optional keys are Opt fields whose zero value is
// absent; the conditional groups are optional structs that render all their keys
// or none (SyncDiffApplied.Effect, the Stages of the two apply events,
// ResyncRequired.SendFailure). Absent means absent: an unknown value is never
// rendered as zero. An Event wraps a payload with the emitting Side; its Attrs —
// `type`, `side`, then the payload keys in documented order — are the single
// source for JSON (MarshalJSON) and slog (LogValue) renderings. Event.Validate
// checks the closed vocabularies, the side column, identifier grammars and the
// group rules.
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
// Observers are called synchronously on the emitting goroutine and must be safe
// for concurrent use; a panic inside one is recovered and ignored.
package observer
