package observer

import (
	"fmt"
	"log/slog"
	"math"
)

// Each event type describes its keys once, in documented order, in its describe
// method:
//
//	func (e UpdateAcked) describe(d *describer) {
//		d.connID(e.ConnectionID)
//		d.namespaceID(e.NamespaceID)
//		d.bytes(e.Bytes)
//		d.optDuration("ackLatencyMs", e.AckLatencyMs, AckLatency)
//		d.positive("sequence", e.Sequence)
//	}
//
// Every call names the key, the kind of value it holds (the describer method,
// which carries the key's safety rule) and, for the numbers and words sinks
// aggregate, what it measures. Rendering (Attrs, and through it JSON and slog),
// validation (Validate) and what the sinks aggregate (Measure, Words) are walks
// of that description; an optional key or group is an `if` on its presence, so
// what is absent is absent from all of them. Adding a key to an event is one line
// there. Rules that tie two keys together sit in the description too, behind
// d.checking().

// describeOp is what a walk over an event's description does.
type describeOp uint8

const (
	opRender  describeOp = iota // append each key and value to attrs
	opCheck                     // apply each key's rule; err holds the first broken one
	opMeasure                   // collect the size and latencies sinks aggregate into m
	opWords                     // collect the closed-vocabulary words into words
)

// describer walks one event's description, doing its op to each key.
type describer struct {
	op    describeOp
	side  Side               // the emitting side: some vocabularies depend on it
	t     Type               // opCheck: the event's type, for the problem
	attrs []slog.Attr        // opRender
	err   *InvalidEventError // opCheck
	// opMeasure and opWords: held by value, not behind a pointer, so that they
	// stay on the stack (escape analysis sees the describer's fields together, and
	// attrs reaches the heap).
	m      Measures
	words  [maxWords]Word
	nWords int
}

// walk runs d over p's description. The switch calls each type's describe method
// directly rather than through the Payload interface: through the interface the
// describer would move to the heap, and Measure and Words, which the metrics sink
// calls on every frame, would allocate. A type missing here still walks, with
// that allocation (TestMeasureAllocatesNothing catches it).
func (d *describer) walk(p Payload) {
	switch p := p.(type) {
	case ConnectionStateChanged:
		p.describe(d)
	case ConnectionBackoffScheduled:
		p.describe(d)
	case GoAwayReceived:
		p.describe(d)
	case EventLoopDelaySampled:
		p.describe(d)
	case ChannelStateChanged:
		p.describe(d)
	case BootstrapSnapshotSent:
		p.describe(d)
	case BootstrapImported:
		p.describe(d)
	case SyncStep2Sent:
		p.describe(d)
	case SyncDiffApplied:
		p.describe(d)
	case UpdateSent:
		p.describe(d)
	case UpdateApplied:
		p.describe(d)
	case UpdateAcked:
		p.describe(d)
	case DegradedBypassApplied:
		p.describe(d)
	case ChunkedUpdateSent:
		p.describe(d)
	case ChunkedUpdateApplied:
		p.describe(d)
	case ChunkedUpdateAcked:
		p.describe(d)
	case ChunkedSnapshotSent:
		p.describe(d)
	case ChunkedSnapshotApplied:
		p.describe(d)
	case ChunkedSnapshotAcked:
		p.describe(d)
	case ChunkedSyncSent:
		p.describe(d)
	case ChunkedSyncApplied:
		p.describe(d)
	case ChunkedSyncAcked:
		p.describe(d)
	case AuthUpgradeRejected:
		p.describe(d)
	case ResyncRequired:
		p.describe(d)
	case UpdateDropped:
		p.describe(d)
	case SendPaused:
		p.describe(d)
	case SendResumed:
		p.describe(d)
	case ConnectionFailed:
		p.describe(d)
	case NamespaceError:
		p.describe(d)
	case NamespaceFailed:
		p.describe(d)
	case IdentityConflicted:
		p.describe(d)
	case ChunkedUpdateAborted:
		p.describe(d)
	case ChunkedSnapshotAborted:
		p.describe(d)
	case ChunkedSyncAborted:
		p.describe(d)
	case SchemaRearmApplied:
		p.describe(d)
	case SchemaRearmFailed:
		p.describe(d)
	default: // a type without its case: the copy goes to the heap, and the walk works
		onHeap := *d
		p.describe(&onHeap)
		*d = onHeap
	}
}

// checking reports whether the walk validates: the rules between keys run only then.
func (d *describer) checking() bool { return d.op == opCheck }

// put appends one rendered key.
func (d *describer) put(a slog.Attr) { d.attrs = append(d.attrs, a) }

// fail records the first broken rule.
func (d *describer) fail(key, format string, args ...any) {
	if d.err == nil {
		d.err = &InvalidEventError{Type: d.t, Key: key, Problem: fmt.Sprintf(format, args...)}
	}
}

// ---- the kinds of keys ----

// text is a string of a fixed grammar: an identifier, a digest, a fingerprint.
func (d *describer) text(key, v string, valid func(string) bool, rule string) {
	switch d.op {
	case opRender:
		d.put(slog.String(key, v))
	case opCheck:
		if !valid(v) {
			d.fail(key, "%s", rule)
		}
	}
}

// connID is connectionId?: absent before the handshake completes.
func (d *describer) connID(o Opt[string]) {
	if v, ok := o.Get(); ok {
		d.text("connectionId", v, ValidConnectionID, "must be 1-64 bytes of [A-Za-z0-9._:-]")
	}
}

// namespaceID is namespaceId.
func (d *describer) namespaceID(v string) {
	d.text("namespaceId", v, ValidNamespaceID, "must match ^ns-[0-9a-f]{32}$")
}

// count is a non-negative int.
func (d *describer) count(key string, v int) {
	switch d.op {
	case opRender:
		d.put(slog.Int(key, v))
	case opCheck:
		if v < 0 {
			d.fail(key, "negative count %d", v)
		}
	}
}

// optCount is an optional count.
func (d *describer) optCount(key string, o Opt[int]) {
	if v, ok := o.Get(); ok {
		d.count(key, v)
	}
}

// bytes is `bytes`, the length of the update, diff or snapshot the event reports:
// a count, and the event's Size for the sinks.
func (d *describer) bytes(v int) {
	if d.op == opMeasure {
		d.m.Size = Some(v)
	}
	d.count("bytes", v)
}

// totalBytes is `totalBytes`, the length of a whole chunked transfer: a wire
// uint32, and the event's Size for the sinks.
func (d *describer) totalBytes(v uint32) {
	if d.op == opMeasure {
		d.m.Size = Some(int(v))
	}
	d.u32("totalBytes", v)
}

// u32 is a wire uint32.
func (d *describer) u32(key string, v uint32) {
	if d.op == opRender {
		d.put(slog.Uint64(key, uint64(v)))
	}
}

// positive is a wire uint32 the contract numbers from 1 (sequence, transferId,
// chunkCount).
func (d *describer) positive(key string, v uint32) {
	switch d.op {
	case opRender:
		d.put(slog.Uint64(key, uint64(v)))
	case opCheck:
		if v == 0 {
			d.fail(key, "must be at least 1")
		}
	}
}

// u64 is a wire uint64 (a safe integer of milliseconds).
func (d *describer) u64(key string, v uint64) {
	if d.op == opRender {
		d.put(slog.Uint64(key, v))
	}
}

// optU64 is an optional u64.
func (d *describer) optU64(key string, o Opt[uint64]) {
	if v, ok := o.Get(); ok {
		d.u64(key, v)
	}
}

// duration is a finite non-negative number of milliseconds: the event's latency
// or delay (it has at most one, besides the stages of an apply), which the sinks
// measure as what.
func (d *describer) duration(key string, v float64, what Duration) {
	switch d.op {
	case opRender:
		d.put(slog.Float64(key, v))
	case opCheck:
		d.checkDuration(key, v)
	case opMeasure:
		d.m.Latency, d.m.Timed = Some(v), what
	}
}

// optDuration is an optional duration: a latency is absent without a clock.
func (d *describer) optDuration(key string, o Opt[float64], what Duration) {
	if v, ok := o.Get(); ok {
		d.duration(key, v, what)
	}
}

// stage is one duration of an apply's stages (see stages).
func (d *describer) stage(key string, v float64) {
	switch d.op {
	case opRender:
		d.put(slog.Float64(key, v))
	case opCheck:
		d.checkDuration(key, v)
	}
}

func (d *describer) checkDuration(key string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		d.fail(key, "must be a finite non-negative duration, got %v", v)
	}
}

// word is a member of a closed vocabulary, which the sinks may count and label
// by.
func (d *describer) word(key, v string, in words) {
	switch d.op {
	case opRender:
		d.put(slog.String(key, v))
	case opCheck:
		if !in.contains(d.side, v) {
			d.fail(key, "%s", in.problem(d.side, v))
		}
	case opWords:
		if d.nWords < len(d.words) {
			folded := in.foldWord(v)
			d.words[d.nWords] = Word{Key: key, Value: folded, Known: in.contains(d.side, folded)}
			d.nWords++
		}
	}
}

// equal is a string this event fixes to one value (a state the event implies).
func (d *describer) equal(key, v, want string) {
	switch d.op {
	case opRender:
		d.put(slog.String(key, v))
	case opCheck:
		if v != want {
			d.fail(key, "must be %q in this event, got %q", want, v)
		}
	}
}

// boolean is a bool.
func (d *describer) boolean(key string, v bool) {
	if d.op == opRender {
		d.put(slog.Bool(key, v))
	}
}

// closeCode is a WebSocket close code, 1000 to 4999.
func (d *describer) closeCode(key string, v int) {
	switch d.op {
	case opRender:
		d.put(slog.Int(key, v))
	case opCheck:
		if v < 1000 || v > 4999 {
			d.fail(key, "%d is not a WebSocket close code", v)
		}
	}
}

// nullableText is a text key that is always there: the string when present, JSON
// null when absent (schema-rearm-applied.updatedAt: an unknown value is reported
// as null, never guessed).
func (d *describer) nullableText(key string, o Opt[string], valid func(string) bool, rule string) {
	if v, ok := o.Get(); ok {
		d.text(key, v, valid, rule)
	} else if d.op == opRender {
		d.put(slog.Any(key, nil))
	}
}

// words is a closed vocabulary as the describer reads it (vocab.go).
type words interface {
	// contains reports whether s is a member (for side, where membership depends on it).
	contains(side Side, s string) bool
	// problem says why s is not a member.
	problem(side Side, s string) string
	// foldWord is s, or the member an unknown s folds to in a vocabulary that folds.
	foldWord(s string) string
}

// ---- safety rules and the error of a broken one ----

// InvalidEventError reports an event that breaks the vocabulary's rules: a side
// that may not emit the type, a value outside a closed vocabulary, an identifier
// or digest with the wrong grammar, a negative or non-finite number, or an
// inconsistent conditional group.
type InvalidEventError struct {
	Type    Type
	Key     string
	Problem string
}

func (e *InvalidEventError) Error() string {
	return fmt.Sprintf("observer: invalid %s event: %s: %s", e.Type, e.Key, e.Problem)
}

// ValidNamespaceID reports whether s is a controlled namespace identifier,
// ^ns-[0-9a-f]{32}$.
func ValidNamespaceID(s string) bool {
	return len(s) == 35 && s[:3] == "ns-" && isLowerHex(s[3:])
}

// ValidConnectionID reports whether s has the grammar this project gives the
// connectionId of HELLO_ACK (docs/protocol.md#hello_ack) in events: 1 to 64
// bytes of ASCII letters, digits and ". _ : -" — an identifier, never free text
// (see docs/decisions.md).
func ValidConnectionID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// ValidSemanticFingerprint reports whether s is a schema semantic fingerprint,
// sha256:v1:<64 lowercase hex>.
func ValidSemanticFingerprint(s string) bool {
	const prefix = "sha256:v1:"
	return len(s) == len(prefix)+64 && s[:len(prefix)] == prefix && isLowerHex(s[len(prefix):])
}

// SchemaUpdatedAt projects the replicated META.schema.updatedAt for
// schema-rearm-applied: present only when raw looks like a timestamp (1 to 40
// bytes of digits and "T Z : . + -"); a legacy or corrupt carrier — or any free
// text — is absent and renders as null: a value that is not known to be safe is
// left out rather than guessed or cleaned up.
func SchemaUpdatedAt(raw string) Opt[string] {
	if !validUpdatedAt(raw) {
		return None[string]()
	}
	return Some(raw)
}

func validUpdatedAt(s string) bool {
	if len(s) == 0 || len(s) > 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || c == 'T' || c == 'Z' || c == ':' || c == '.' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}
