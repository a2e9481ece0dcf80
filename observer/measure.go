package observer

// What the sinks that aggregate events rather than keep them (metrics, log
// summaries) read of an event: its measures (Event.Measures) and its
// closed-vocabulary words (Event.Words), both from the event's description, so
// that a sink needs no code per event type.

// Measures are the numbers of one event that sinks sum, count and bucket. An
// event has at most one latency or delay besides the stages of an apply.
type Measures struct {
	// TypeIndex is the position of the event's type in Types(), for sinks that
	// keep their state per type in arrays; -1 for an event without a payload.
	TypeIndex int
	// Size is the length in bytes of the update, diff or snapshot the event
	// reports (bytes, or totalBytes for a chunked send; Type.Content says which).
	Size Opt[int]
	// Latency is the event's latency or delay in milliseconds, and Timed what it
	// times; absent when the event has none, or leaves it out (a latency is
	// absent without a clock).
	Latency Opt[float64]
	Timed   Duration
	// Stages is the four-stage split of an apply.
	Stages Opt[Stages]
}

// Duration is what the latency or delay of an event times.
type Duration uint8

// The latencies and delays events carry.
const (
	ApplyLatency  Duration = iota // applyLatencyMs: entering apply to apply settled
	AckLatency                    // ackLatencyMs: sending to the acknowledgement
	SendQueueWait                 // update-sent.sendQueueMs: the oldest update's wait
	LoopDelay                     // event-loop-delay-sampled.delayMs
	BackoffDelay                  // connection-backoff-scheduled.delayMs
	NumDurations
)

// Measure sets m to the event's measures. It allocates nothing.
//
// The per-frame events, which the sinks see on every frame, are measured by hand
// here: walking a description and finding a type's position by its name cost more
// than the sinks' own work. TestMeasuresFollowDescriptions holds these cases to
// the descriptions, so a measured key added to a per-frame event there and not
// here fails it. The other events walk their descriptions.
func (e Event) Measure(m *Measures) {
	// Each case sets m field by field (set), and copies Stages only when there: a
	// struct built up and then copied whole stalls the loads of the copy.
	switch p := e.Payload.(type) {
	case EventLoopDelaySampled:
		m.set(indexEventLoopDelaySampled, 0, false, p.DelayMs, true, LoopDelay)
	case SyncStep2Sent:
		m.set(indexSyncStep2Sent, p.Bytes, true, 0, false, 0)
	case SyncDiffApplied:
		m.set(indexSyncDiffApplied, p.Bytes, true, p.ApplyLatencyMs.v, p.ApplyLatencyMs.ok, ApplyLatency)
		if p.Stages.ok {
			m.Stages = p.Stages
		}
	case UpdateSent:
		m.set(indexUpdateSent, p.Bytes, true, p.SendQueueMs.v, p.SendQueueMs.ok, SendQueueWait)
	case UpdateApplied:
		m.set(indexUpdateApplied, p.Bytes, true, p.ApplyLatencyMs.v, p.ApplyLatencyMs.ok, ApplyLatency)
		if p.Stages.ok {
			m.Stages = p.Stages
		}
	case UpdateAcked:
		m.set(indexUpdateAcked, p.Bytes, true, p.AckLatencyMs.v, p.AckLatencyMs.ok, AckLatency)
	case DegradedBypassApplied:
		m.set(indexDegradedBypassApplied, p.Bytes, true, 0, false, 0)
	case ChunkedUpdateSent:
		m.set(indexChunkedUpdateSent, int(p.TotalBytes), true, 0, false, 0)
	case ChunkedUpdateApplied:
		m.set(indexChunkedUpdateApplied, p.Bytes, true, p.ApplyLatencyMs.v, p.ApplyLatencyMs.ok, ApplyLatency)
	case ChunkedUpdateAcked:
		m.set(indexChunkedUpdateAcked, p.Bytes, true, p.AckLatencyMs.v, p.AckLatencyMs.ok, AckLatency)
	case ChunkedSnapshotSent:
		m.set(indexChunkedSnapshotSent, int(p.TotalBytes), true, 0, false, 0)
	case ChunkedSnapshotApplied:
		m.set(indexChunkedSnapshotApplied, p.Bytes, true, p.ApplyLatencyMs.v, p.ApplyLatencyMs.ok, ApplyLatency)
	case ChunkedSnapshotAcked:
		m.set(indexChunkedSnapshotAcked, p.Bytes, true, p.AckLatencyMs.v, p.AckLatencyMs.ok, AckLatency)
	case ChunkedSyncSent:
		m.set(indexChunkedSyncSent, int(p.TotalBytes), true, 0, false, 0)
	case ChunkedSyncApplied:
		m.set(indexChunkedSyncApplied, p.Bytes, true, p.ApplyLatencyMs.v, p.ApplyLatencyMs.ok, ApplyLatency)
	case ChunkedSyncAcked:
		m.set(indexChunkedSyncAcked, p.Bytes, true, p.AckLatencyMs.v, p.AckLatencyMs.ok, AckLatency)
	case SendPaused:
		m.set(indexSendPaused, 0, false, 0, false, 0)
	case SendResumed:
		m.set(indexSendResumed, 0, false, 0, false, 0)
	default:
		*m = measureDescribed(e)
	}
}

// set sets every field of m: an event at index in Types() with this size and
// this latency, timing timed, and no stages.
func (m *Measures) set(index, size int, hasSize bool, latency float64, hasLatency bool, timed Duration) {
	m.TypeIndex = index
	m.Size.v, m.Size.ok = size, hasSize
	m.Latency.v, m.Latency.ok = latency, hasLatency
	m.Timed = timed
	m.Stages = Opt[Stages]{}
}

// measureDescribed measures e by walking its description.
func measureDescribed(e Event) Measures {
	d := describer{op: opMeasure, side: e.Side}
	d.m.TypeIndex = -1
	if e.Payload != nil {
		d.walk(e.Payload)
		d.m.TypeIndex = typeIndex[e.Payload.Type()]
	}
	return d.m
}

// The positions of the per-frame types in Types().
var (
	indexEventLoopDelaySampled  = typeIndex[TypeEventLoopDelaySampled]
	indexSyncStep2Sent          = typeIndex[TypeSyncStep2Sent]
	indexSyncDiffApplied        = typeIndex[TypeSyncDiffApplied]
	indexUpdateSent             = typeIndex[TypeUpdateSent]
	indexUpdateApplied          = typeIndex[TypeUpdateApplied]
	indexUpdateAcked            = typeIndex[TypeUpdateAcked]
	indexDegradedBypassApplied  = typeIndex[TypeDegradedBypassApplied]
	indexChunkedUpdateSent      = typeIndex[TypeChunkedUpdateSent]
	indexChunkedUpdateApplied   = typeIndex[TypeChunkedUpdateApplied]
	indexChunkedUpdateAcked     = typeIndex[TypeChunkedUpdateAcked]
	indexChunkedSnapshotSent    = typeIndex[TypeChunkedSnapshotSent]
	indexChunkedSnapshotApplied = typeIndex[TypeChunkedSnapshotApplied]
	indexChunkedSnapshotAcked   = typeIndex[TypeChunkedSnapshotAcked]
	indexChunkedSyncSent        = typeIndex[TypeChunkedSyncSent]
	indexChunkedSyncApplied     = typeIndex[TypeChunkedSyncApplied]
	indexChunkedSyncAcked       = typeIndex[TypeChunkedSyncAcked]
	indexSendPaused             = typeIndex[TypeSendPaused]
	indexSendResumed            = typeIndex[TypeSendResumed]
)

// Word is one closed-vocabulary key of an event, as a sink may count or label by
// it.
type Word struct {
	Key string
	// Value is the key's value, folded into its vocabulary when that vocabulary
	// folds unknown strings (connection and namespace codes to INTERNAL_ERROR,
	// GOAWAY reasons to other).
	Value string
	// Known reports whether Value is a member of the vocabulary (for the emitting
	// side); a sink labels unknown values with a bounded placeholder.
	Known bool
}

// maxWords is the most closed-vocabulary keys one event has: three
// (resync-required with its send-failed group: cause, reason, connectionState;
// namespace-error: code, direction, terminalState), and one more.
const maxWords = 4

// Words appends the event's closed-vocabulary keys, in documented order, to dst
// and returns the extended slice: the values sinks count and label events by. It
// allocates nothing when dst has room (an event has at most a handful).
func (e Event) Words(dst []Word) []Word {
	d := describer{op: opWords, side: e.Side}
	if e.Payload != nil {
		d.walk(e.Payload)
	}
	return append(dst, d.words[:d.nWords]...)
}
