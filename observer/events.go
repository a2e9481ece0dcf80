package observer

// Payload is the body of an event: one of the 36 structs below, one per event
// type of the vocabulary (docs/protocol.md#events; the side that emits it is in
// parentheses on each). Each describes exactly its documented keys in documented
// order, once, in its describe method (see describer); optional keys (Opt
// fields, and the conditional groups) are left out when absent. The set is
// closed: only this package implements Payload.
type Payload interface {
	// Type is the event's type.
	Type() Type
	// describe walks the event's keys: the one description rendering, validation
	// and the sinks' measures all read.
	describe(d *describer)
}

// ---- Connection domain --------------------------------------------------------

// ConnectionStateChanged is `connection-state-changed` (hub/peer): a connection
// moved between states (hub: handshaking/ready/draining/closed; peer: the 8
// states of its connection — see ConnectionState).
type ConnectionStateChanged struct {
	ConnectionID Opt[string]
	From, To     ConnectionState
}

func (ConnectionStateChanged) Type() Type { return TypeConnectionStateChanged }
func (e ConnectionStateChanged) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.word("from", string(e.From), connectionStates)
	d.word("to", string(e.To), connectionStates)
}

// ConnectionBackoffScheduled is `connection-backoff-scheduled` (peer): the
// reconnect backoff (full jitter) armed its timer.
type ConnectionBackoffScheduled struct {
	Attempt int
	DelayMs float64
	Reason  BackoffReason
}

func (ConnectionBackoffScheduled) Type() Type { return TypeConnectionBackoffScheduled }
func (e ConnectionBackoffScheduled) describe(d *describer) {
	d.count("attempt", e.Attempt)
	d.duration("delayMs", e.DelayMs, BackoffDelay)
	d.word("reason", string(e.Reason), backoffReasons)
}

// GoAwayReceived is `goaway-received` (peer). Build ReasonCode with
// FoldGoAwayReason: unknown wire codes become `other`.
type GoAwayReceived struct {
	ConnectionID   Opt[string]
	ReasonCode     GoAwayReason
	DrainTimeoutMs uint64
	RetryAfterMs   Opt[uint64]
}

func (GoAwayReceived) Type() Type { return TypeGoAwayReceived }
func (e GoAwayReceived) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.word("reasonCode", string(e.ReasonCode), goAwayReasons)
	d.u64("drainTimeoutMs", e.DrainTimeoutMs)
	d.optU64("retryAfterMs", e.RetryAfterMs)
}

// EventLoopDelaySampled is `event-loop-delay-sampled` (hub/peer): how late the
// liveness ping timer fired (actual − planned, one injected monotonic clock).
type EventLoopDelaySampled struct {
	ConnectionID Opt[string]
	DelayMs      float64
}

func (EventLoopDelaySampled) Type() Type { return TypeEventLoopDelaySampled }
func (e EventLoopDelaySampled) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.duration("delayMs", e.DelayMs, LoopDelay)
}

// ---- Channel domain -----------------------------------------------------------

// ChannelStateChanged is `channel-state-changed` (hub/peer): a namespace channel
// moved between states (hub 9, peer 11 — see ChannelState).
type ChannelStateChanged struct {
	ConnectionID Opt[string]
	NamespaceID  string
	From, To     ChannelState
}

func (ChannelStateChanged) Type() Type { return TypeChannelStateChanged }
func (e ChannelStateChanged) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.word("from", string(e.From), channelStates)
	d.word("to", string(e.To), channelStates)
}

// ---- Bootstrap, reconcile, updates (per frame) ---------------------------------

// Stages is the four-stage split of an apply
// (docs/protocol.md#delivery-and-clocks), captured in the registry's sequencer
// slot from its stage clock: present all together or not at all.
type Stages struct {
	QueueWaitMs      float64 // slotStart − admission
	ProtectedCheckMs float64 // applyStart − slotStart
	LiveApplyMs      float64 // dirtyStart − applyStart
	DirtyNotifyMs    float64 // dirtyDone − dirtyStart
}

// stages describes the group: all four durations or none, which the sinks
// measure as the group.
func (d *describer) stages(o Opt[Stages]) {
	if d.op == opMeasure {
		d.m.Stages = o
		return
	}
	if s, ok := o.Get(); ok {
		d.stage("queueWaitMs", s.QueueWaitMs)
		d.stage("protectedCheckMs", s.ProtectedCheckMs)
		d.stage("liveApplyMs", s.LiveApplyMs)
		d.stage("dirtyNotifyMs", s.DirtyNotifyMs)
	}
}

// BootstrapSnapshotSent is `bootstrap-snapshot-sent` (hub): the length of the
// single-frame BOOTSTRAP_SNAPSHOT snapshot.
type BootstrapSnapshotSent struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
}

func (BootstrapSnapshotSent) Type() Type { return TypeBootstrapSnapshotSent }
func (e BootstrapSnapshotSent) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
}

// BootstrapImported is `bootstrap-imported` (peer): the length of the snapshot
// imported locally.
type BootstrapImported struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
}

func (BootstrapImported) Type() Type { return TypeBootstrapImported }
func (e BootstrapImported) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
}

// SyncStep2Sent is `sync-step2-sent` (hub/peer): an outbound single-frame Step2.
// encodedUpdateBytes is rendered from Bytes (the contract says it always equals
// bytes).
type SyncStep2Sent struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
	SyncRoundID  uint32
}

func (SyncStep2Sent) Type() Type { return TypeSyncStep2Sent }
func (e SyncStep2Sent) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.u32("syncRoundId", e.SyncRoundID)
	d.count("encodedUpdateBytes", e.Bytes)
}

// SyncDiffApplied is `sync-diff-applied` (hub/peer): a single-frame Step2 diff
// applied. Effect is the single-fate group (stateVectorChanged, applyEffect,
// stateVectorBeforeHash, stateVectorAfterHash), absent when either state-vector
// capture failed; Stages is present when the registry's stage clock is injected.
// Sequence is the SYNC_STEP2 frame's envelope sequence.
type SyncDiffApplied struct {
	ConnectionID   Opt[string]
	NamespaceID    string
	Bytes          int
	ApplyLatencyMs Opt[float64]
	SyncRoundID    uint32
	Effect         Opt[SVEffect]
	Sequence       uint32
	Stages         Opt[Stages]
}

func (SyncDiffApplied) Type() Type { return TypeSyncDiffApplied }
func (e SyncDiffApplied) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.optDuration("applyLatencyMs", e.ApplyLatencyMs, ApplyLatency)
	d.u32("syncRoundId", e.SyncRoundID)
	d.count("encodedUpdateBytes", e.Bytes)
	if g, ok := e.Effect.Get(); ok {
		d.boolean("stateVectorChanged", g.Changed())
		d.word("applyEffect", string(g.ApplyEffect()), applyEffects)
		d.text("stateVectorBeforeHash", g.BeforeHash(), validDigest, "effect group not built with NewSVEffect")
		d.text("stateVectorAfterHash", g.AfterHash(), validDigest, "effect group not built with NewSVEffect")
	}
	d.positive("sequence", e.Sequence)
	d.stages(e.Stages)
}

// UpdateSent is `update-sent` (hub/peer): an outbound UPDATE frame (a merged
// frame reports its merged length). Sequence is the frame's envelope sequence;
// SendQueueMs is dequeue time − oldest item's enqueue time.
type UpdateSent struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
	Sequence     uint32
	SendQueueMs  Opt[float64]
}

func (UpdateSent) Type() Type { return TypeUpdateSent }
func (e UpdateSent) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.positive("sequence", e.Sequence)
	d.optDuration("sendQueueMs", e.SendQueueMs, SendQueueWait)
}

// UpdateApplied is `update-applied` (hub/peer): an inbound UPDATE applied (not in
// degraded mode). Sequence is the UPDATE frame's envelope sequence.
type UpdateApplied struct {
	ConnectionID   Opt[string]
	NamespaceID    string
	Bytes          int
	ApplyLatencyMs Opt[float64]
	Sequence       uint32
	Stages         Opt[Stages]
}

func (UpdateApplied) Type() Type { return TypeUpdateApplied }
func (e UpdateApplied) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.optDuration("applyLatencyMs", e.ApplyLatencyMs, ApplyLatency)
	d.positive("sequence", e.Sequence)
	d.stages(e.Stages)
}

// UpdateAcked is `update-acked` (hub/peer): an UPDATE_ACK settled an outbound
// UPDATE. Sequence is UPDATE_ACK.ackedSequence.
type UpdateAcked struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
	AckLatencyMs Opt[float64]
	Sequence     uint32
}

func (UpdateAcked) Type() Type { return TypeUpdateAcked }
func (e UpdateAcked) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.optDuration("ackLatencyMs", e.AckLatencyMs, AckLatency)
	d.positive("sequence", e.Sequence)
}

// DegradedBypassApplied is `degraded-bypass-applied` (peer): a hub→peer apply to
// memory while persistence is degraded. No latency keys.
type DegradedBypassApplied struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
	Sequence     uint32
}

func (DegradedBypassApplied) Type() Type { return TypeDegradedBypassApplied }
func (e DegradedBypassApplied) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.positive("sequence", e.Sequence)
}

// ChunkedUpdateSent is `chunked-update-sent` (hub/peer): the last chunk of an
// outbound kind=0 transfer was sent. Never carries latency keys.
type ChunkedUpdateSent struct {
	ConnectionID Opt[string]
	NamespaceID  string
	TransferID   uint32
	ChunkCount   uint32
	TotalBytes   uint32
}

func (ChunkedUpdateSent) Type() Type { return TypeChunkedUpdateSent }
func (e ChunkedUpdateSent) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.positive("transferId", e.TransferID)
	d.positive("chunkCount", e.ChunkCount)
	d.totalBytes(e.TotalBytes)
}

// ChunkedUpdateApplied is `chunked-update-applied` (hub/peer): a reassembled
// kind=0 transfer was applied. Bytes is the declared totalBytes.
type ChunkedUpdateApplied struct {
	ConnectionID   Opt[string]
	NamespaceID    string
	Bytes          int
	ChunkCount     uint32
	ApplyLatencyMs Opt[float64]
}

func (ChunkedUpdateApplied) Type() Type { return TypeChunkedUpdateApplied }
func (e ChunkedUpdateApplied) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.positive("chunkCount", e.ChunkCount)
	d.optDuration("applyLatencyMs", e.ApplyLatencyMs, ApplyLatency)
}

// ChunkedUpdateAcked is `chunked-update-acked` (hub/peer): the single UPDATE_ACK
// of a kind=0 transfer's last chunk arrived.
type ChunkedUpdateAcked struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
	AckLatencyMs Opt[float64]
}

func (ChunkedUpdateAcked) Type() Type { return TypeChunkedUpdateAcked }
func (e ChunkedUpdateAcked) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.optDuration("ackLatencyMs", e.AckLatencyMs, AckLatency)
}

// ChunkedSnapshotSent is `chunked-snapshot-sent` (hub): the last chunk of a
// kind=1 snapshot transfer was sent.
type ChunkedSnapshotSent struct {
	ConnectionID Opt[string]
	NamespaceID  string
	TransferID   uint32
	ChunkCount   uint32
	TotalBytes   uint32
}

func (ChunkedSnapshotSent) Type() Type { return TypeChunkedSnapshotSent }
func (e ChunkedSnapshotSent) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.positive("transferId", e.TransferID)
	d.positive("chunkCount", e.ChunkCount)
	d.totalBytes(e.TotalBytes)
}

// ChunkedSnapshotApplied is `chunked-snapshot-applied` (peer): a reassembled
// kind=1 snapshot was imported.
type ChunkedSnapshotApplied struct {
	ConnectionID   Opt[string]
	NamespaceID    string
	Bytes          int
	ChunkCount     uint32
	ApplyLatencyMs Opt[float64]
}

func (ChunkedSnapshotApplied) Type() Type { return TypeChunkedSnapshotApplied }
func (e ChunkedSnapshotApplied) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.positive("chunkCount", e.ChunkCount)
	d.optDuration("applyLatencyMs", e.ApplyLatencyMs, ApplyLatency)
}

// ChunkedSnapshotAcked is `chunked-snapshot-acked` (hub): the BOOTSTRAP_ACK of a
// kind=1 transfer's last chunk arrived.
type ChunkedSnapshotAcked struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
	AckLatencyMs Opt[float64]
}

func (ChunkedSnapshotAcked) Type() Type { return TypeChunkedSnapshotAcked }
func (e ChunkedSnapshotAcked) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.optDuration("ackLatencyMs", e.AckLatencyMs, AckLatency)
}

// ChunkedSyncSent is `chunked-sync-sent` (hub/peer): the last chunk of a kind=2
// sync-diff transfer was sent.
type ChunkedSyncSent struct {
	ConnectionID Opt[string]
	NamespaceID  string
	TransferID   uint32
	ChunkCount   uint32
	TotalBytes   uint32
	SyncRoundID  uint32
}

func (ChunkedSyncSent) Type() Type { return TypeChunkedSyncSent }
func (e ChunkedSyncSent) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.positive("transferId", e.TransferID)
	d.positive("chunkCount", e.ChunkCount)
	d.totalBytes(e.TotalBytes)
	d.u32("syncRoundId", e.SyncRoundID)
}

// ChunkedSyncApplied is `chunked-sync-applied` (hub/peer): a reassembled kind=2
// diff was applied.
type ChunkedSyncApplied struct {
	ConnectionID   Opt[string]
	NamespaceID    string
	Bytes          int
	ChunkCount     uint32
	SyncRoundID    uint32
	ApplyLatencyMs Opt[float64]
}

func (ChunkedSyncApplied) Type() Type { return TypeChunkedSyncApplied }
func (e ChunkedSyncApplied) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.positive("chunkCount", e.ChunkCount)
	d.u32("syncRoundId", e.SyncRoundID)
	d.optDuration("applyLatencyMs", e.ApplyLatencyMs, ApplyLatency)
}

// ChunkedSyncAcked is `chunked-sync-acked` (hub/peer): the SYNC_APPLIED of a
// kind=2 transfer's last chunk arrived.
type ChunkedSyncAcked struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
	AckLatencyMs Opt[float64]
}

func (ChunkedSyncAcked) Type() Type { return TypeChunkedSyncAcked }
func (e ChunkedSyncAcked) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.bytes(e.Bytes)
	d.optDuration("ackLatencyMs", e.AckLatencyMs, AckLatency)
}

// ---- Auth, backpressure, resync -------------------------------------------------

// AuthUpgradeRejected is `auth-upgrade-rejected` (hub): a WebSocket upgrade
// refused before any connection exists, hence no connectionId key at all.
type AuthUpgradeRejected struct {
	Reason AuthRejectReason
}

func (AuthUpgradeRejected) Type() Type { return TypeAuthUpgradeRejected }
func (e AuthUpgradeRejected) describe(d *describer) {
	d.word("reason", string(e.Reason), authRejectReasons)
}

// QueueSample is the send-path context sampled when an UPDATE could not be sent:
// the update's length, the limit, the queue and window at that moment, and the
// channel and connection states projected at emission. BufferedAmount is present
// only when the transport exposes bufferedAmount.
type QueueSample struct {
	UpdateBytes       int
	MaxUpdateBytes    int
	QueuedUpdateCount int
	QueuedUpdateBytes int
	InFlightCount     int
	ChannelState      ChannelState
	ConnectionState   ConnectionState
	BufferedAmount    Opt[int]
}

// describe describes the sample, whose channel state the event fixes to channel.
func (s QueueSample) describe(d *describer, channel ChannelState) {
	d.count("updateBytes", s.UpdateBytes)
	d.count("maxUpdateBytes", s.MaxUpdateBytes)
	d.count("queuedUpdateCount", s.QueuedUpdateCount)
	d.count("queuedUpdateBytes", s.QueuedUpdateBytes)
	d.count("inFlightCount", s.InFlightCount)
	d.equal("channelState", string(s.ChannelState), string(channel))
	d.word("connectionState", string(s.ConnectionState), connectionStates)
	d.optCount("bufferedAmount", s.BufferedAmount)
}

// SendFailure is the group resync-required carries only with cause send-failed:
// the sub-reason and the QueueSample taken before the drop.
type SendFailure struct {
	Reason SendFailureReason
	QueueSample
}

// ResyncRequired is `resync-required` (hub/peer): incremental continuity of a
// namespace was declared void. SendFailure must be present exactly when Cause is
// send-failed; its ChannelState is then needs-resync.
type ResyncRequired struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Cause        ResyncCause
	SendFailure  Opt[SendFailure]
}

func (ResyncRequired) Type() Type { return TypeResyncRequired }
func (e ResyncRequired) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.word("cause", string(e.Cause), resyncCauses)
	g, ok := e.SendFailure.Get()
	if d.checking() && ok != (e.Cause == ResyncSendFailed) {
		d.fail("reason", "the send-failed group must be present exactly when cause is send-failed")
	}
	if ok {
		d.word("reason", string(g.Reason), sendFailureReasons)
		g.QueueSample.describe(d, ChannelNeedsResync)
	}
}

// UpdateDropped is `update-dropped` (hub/peer): an UPDATE over maxUpdateBytes
// dropped while the queue was not empty (no resync declared). The sample's
// ChannelState is live.
type UpdateDropped struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Reason       DropReason
	QueueSample
}

func (UpdateDropped) Type() Type { return TypeUpdateDropped }
func (e UpdateDropped) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.word("reason", string(e.Reason), dropReasons)
	e.QueueSample.describe(d, ChannelLive)
}

// SendPaused is `send-paused` (hub/peer): bufferedAmount crossed the high water
// mark and dequeuing paused.
type SendPaused struct {
	ConnectionID   Opt[string]
	BufferedAmount int
}

func (SendPaused) Type() Type { return TypeSendPaused }
func (e SendPaused) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.count("bufferedAmount", e.BufferedAmount)
}

// SendResumed is `send-resumed` (hub/peer): bufferedAmount fell to the low water
// mark and dequeuing resumed.
type SendResumed struct {
	ConnectionID   Opt[string]
	BufferedAmount int
}

func (SendResumed) Type() Type { return TypeSendResumed }
func (e SendResumed) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.count("bufferedAmount", e.BufferedAmount)
}

// ---- Stable error counts ------------------------------------------------------

// ConnectionFailed is `connection-failed` (hub/peer): a connection closed on
// an error. Build Code with FoldConnectionCode.
type ConnectionFailed struct {
	ConnectionID Opt[string]
	Code         ConnectionCode
	WSCloseCode  int
}

func (ConnectionFailed) Type() Type { return TypeConnectionFailed }
func (e ConnectionFailed) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.word("code", string(e.Code), connectionCodes)
	d.closeCode("wsCloseCode", e.WSCloseCode)
}

// NamespaceError is `namespace-error` (hub/peer): a namespace ERROR frame sent or
// received. Build Code with FoldNamespaceCode and TerminalState with
// Code.TerminalState() or ClampTerminalState (needs-resync → failed).
type NamespaceError struct {
	ConnectionID  Opt[string]
	NamespaceID   string
	Code          NamespaceCode
	Direction     Direction
	TerminalState Opt[TerminalState]
}

func (NamespaceError) Type() Type { return TypeNamespaceError }
func (e NamespaceError) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.word("code", string(e.Code), namespaceCodes)
	d.word("direction", string(e.Direction), directions)
	if t, ok := e.TerminalState.Get(); ok {
		d.word("terminalState", string(t), terminalStates)
	}
}

// NamespaceFailed is `namespace-failed` (hub/peer): exactly one per edge into the
// failed terminal state. TimeoutMs (the resolved configured limit) may be present
// only for the timer causes.
type NamespaceFailed struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Cause        FailedCause
	TimeoutMs    Opt[uint64]
}

func (NamespaceFailed) Type() Type { return TypeNamespaceFailed }
func (e NamespaceFailed) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.word("cause", string(e.Cause), failedCauses)
	if d.checking() && e.TimeoutMs.Present() && !e.Cause.Timer() {
		d.fail("timeoutMs", "only the timer causes carry timeoutMs, not %q", e.Cause)
	}
	d.optU64("timeoutMs", e.TimeoutMs)
}

// IdentityConflicted is `identity-conflicted` (hub/peer): a namespace entered
// conflicted.
type IdentityConflicted struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Via          ConflictVia
}

func (IdentityConflicted) Type() Type { return TypeIdentityConflicted }
func (e IdentityConflicted) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.word("via", string(e.Via), conflictVias)
}

// ChunkedUpdateAborted is `chunked-update-aborted` (hub/peer): the side that
// discarded a partial kind=0 assembly reports its progress. No connectionId key.
type ChunkedUpdateAborted struct {
	NamespaceID    string
	TransferID     uint32
	Reason         AbortReason
	ReceivedChunks int
	ReceivedBytes  int
}

func (ChunkedUpdateAborted) Type() Type { return TypeChunkedUpdateAborted }
func (e ChunkedUpdateAborted) describe(d *describer) {
	d.namespaceID(e.NamespaceID)
	d.positive("transferId", e.TransferID)
	d.word("reason", string(e.Reason), abortReasons)
	d.count("receivedChunks", e.ReceivedChunks)
	d.count("receivedBytes", e.ReceivedBytes)
}

// ChunkedSnapshotAborted is `chunked-snapshot-aborted` (hub/peer): as
// ChunkedUpdateAborted, for a kind=1 transfer.
type ChunkedSnapshotAborted struct {
	NamespaceID    string
	TransferID     uint32
	Reason         AbortReason
	ReceivedChunks int
	ReceivedBytes  int
}

func (ChunkedSnapshotAborted) Type() Type { return TypeChunkedSnapshotAborted }
func (e ChunkedSnapshotAborted) describe(d *describer) {
	d.namespaceID(e.NamespaceID)
	d.positive("transferId", e.TransferID)
	d.word("reason", string(e.Reason), abortReasons)
	d.count("receivedChunks", e.ReceivedChunks)
	d.count("receivedBytes", e.ReceivedBytes)
}

// ChunkedSyncAborted is `chunked-sync-aborted` (hub/peer): as
// ChunkedUpdateAborted, for a kind=2 transfer.
type ChunkedSyncAborted struct {
	NamespaceID    string
	TransferID     uint32
	Reason         AbortReason
	ReceivedChunks int
	ReceivedBytes  int
}

func (ChunkedSyncAborted) Type() Type { return TypeChunkedSyncAborted }
func (e ChunkedSyncAborted) describe(d *describer) {
	d.namespaceID(e.NamespaceID)
	d.positive("transferId", e.TransferID)
	d.word("reason", string(e.Reason), abortReasons)
	d.count("receivedChunks", e.ReceivedChunks)
	d.count("receivedBytes", e.ReceivedBytes)
}

// ---- Schema re-arm domain ------------------------------------------------------

// SchemaRearmApplied is `schema-rearm-applied` (peer): a replicated schema was
// installed. SemanticFingerprint is sha256:v1:<64 hex>; UpdatedAt is the
// replicated META.schema.updatedAt (build it with SchemaUpdatedAt) and, unlike
// every other optional, renders as null when absent — the key is always there.
type SchemaRearmApplied struct {
	ConnectionID        Opt[string]
	NamespaceID         string
	SemanticFingerprint string
	UpdatedAt           Opt[string]
}

func (SchemaRearmApplied) Type() Type { return TypeSchemaRearmApplied }
func (e SchemaRearmApplied) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.text("semanticFingerprint", e.SemanticFingerprint, ValidSemanticFingerprint, "must match sha256:v1:<64 lowercase hex>")
	d.nullableText("updatedAt", e.UpdatedAt, validUpdatedAt, "not a timestamp (build it with SchemaUpdatedAt)")
}

// SchemaRearmFailed is `schema-rearm-failed` (peer): a schema re-arm failed
// fatally and the channel closes.
type SchemaRearmFailed struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Code         SchemaRearmCode
}

func (SchemaRearmFailed) Type() Type { return TypeSchemaRearmFailed }
func (e SchemaRearmFailed) describe(d *describer) {
	d.connID(e.ConnectionID)
	d.namespaceID(e.NamespaceID)
	d.word("code", string(e.Code), schemaRearmCodes)
}
