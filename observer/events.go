package observer

// Payload is the body of an event: one of the 36 structs below, one per event
// type of the vocabulary (§23.1; the side that emits it is in parentheses on
// each). Each renders exactly its documented keys in documented order; optional
// keys (Opt fields, and the conditional groups) are left out when absent. The
// set is closed: only this package implements Payload.
type Payload interface {
	// Type is the event's type.
	Type() Type
	render(f *fields)
	check(c *checker)
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
func (e ConnectionStateChanged) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("from", string(e.From))
	f.str("to", string(e.To))
}
func (e ConnectionStateChanged) check(c *checker) {
	c.connID(e.ConnectionID)
	c.connState("from", e.From)
	c.connState("to", e.To)
}

// ConnectionBackoffScheduled is `connection-backoff-scheduled` (peer): the
// reconnect backoff (full jitter) armed its timer.
type ConnectionBackoffScheduled struct {
	Attempt int
	DelayMs float64
	Reason  BackoffReason
}

func (ConnectionBackoffScheduled) Type() Type { return TypeConnectionBackoffScheduled }
func (e ConnectionBackoffScheduled) render(f *fields) {
	f.int("attempt", e.Attempt)
	f.ms("delayMs", e.DelayMs)
	f.str("reason", string(e.Reason))
}
func (e ConnectionBackoffScheduled) check(c *checker) {
	c.count("attempt", e.Attempt)
	c.ms("delayMs", e.DelayMs)
	c.member("reason", e.Reason)
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
func (e GoAwayReceived) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("reasonCode", string(e.ReasonCode))
	f.u64("drainTimeoutMs", e.DrainTimeoutMs)
	f.optU64("retryAfterMs", e.RetryAfterMs)
}
func (e GoAwayReceived) check(c *checker) {
	c.connID(e.ConnectionID)
	c.member("reasonCode", e.ReasonCode)
}

// EventLoopDelaySampled is `event-loop-delay-sampled` (hub/peer): how late the
// liveness ping timer fired (actual − planned, one injected monotonic clock).
type EventLoopDelaySampled struct {
	ConnectionID Opt[string]
	DelayMs      float64
}

func (EventLoopDelaySampled) Type() Type { return TypeEventLoopDelaySampled }
func (e EventLoopDelaySampled) render(f *fields) {
	f.connID(e.ConnectionID)
	f.ms("delayMs", e.DelayMs)
}
func (e EventLoopDelaySampled) check(c *checker) {
	c.connID(e.ConnectionID)
	c.ms("delayMs", e.DelayMs)
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
func (e ChannelStateChanged) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("namespaceId", e.NamespaceID)
	f.str("from", string(e.From))
	f.str("to", string(e.To))
}
func (e ChannelStateChanged) check(c *checker) {
	c.connID(e.ConnectionID)
	c.namespaceID(e.NamespaceID)
	c.chanState("from", e.From)
	c.chanState("to", e.To)
}

// ---- Bootstrap, reconcile, updates (per frame) ---------------------------------

// Stages is the four-stage split of an apply (§23.4), captured in the registry's
// sequencer slot from its stage clock: present all together or not at all.
type Stages struct {
	QueueWaitMs      float64 // slotStart − admission
	ProtectedCheckMs float64 // applyStart − slotStart
	LiveApplyMs      float64 // dirtyStart − applyStart
	DirtyNotifyMs    float64 // dirtyDone − dirtyStart
}

func renderStages(f *fields, o Opt[Stages]) {
	if s, ok := o.Get(); ok {
		f.ms("queueWaitMs", s.QueueWaitMs)
		f.ms("protectedCheckMs", s.ProtectedCheckMs)
		f.ms("liveApplyMs", s.LiveApplyMs)
		f.ms("dirtyNotifyMs", s.DirtyNotifyMs)
	}
}

func checkStages(c *checker, o Opt[Stages]) {
	if s, ok := o.Get(); ok {
		c.ms("queueWaitMs", s.QueueWaitMs)
		c.ms("protectedCheckMs", s.ProtectedCheckMs)
		c.ms("liveApplyMs", s.LiveApplyMs)
		c.ms("dirtyNotifyMs", s.DirtyNotifyMs)
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
func (e BootstrapSnapshotSent) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
}
func (e BootstrapSnapshotSent) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
}

// BootstrapImported is `bootstrap-imported` (peer): the length of the snapshot
// imported locally.
type BootstrapImported struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Bytes        int
}

func (BootstrapImported) Type() Type { return TypeBootstrapImported }
func (e BootstrapImported) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
}
func (e BootstrapImported) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
}

func renderNsBytes(f *fields, conn Opt[string], ns string, bytes int) {
	f.connID(conn)
	f.str("namespaceId", ns)
	f.int("bytes", bytes)
}

func checkNsBytes(c *checker, conn Opt[string], ns string, bytes int) {
	c.connID(conn)
	c.namespaceID(ns)
	c.count("bytes", bytes)
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
func (e SyncStep2Sent) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
	f.u32("syncRoundId", e.SyncRoundID)
	f.int("encodedUpdateBytes", e.Bytes)
}
func (e SyncStep2Sent) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
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
func (e SyncDiffApplied) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
	f.optMs("applyLatencyMs", e.ApplyLatencyMs)
	f.u32("syncRoundId", e.SyncRoundID)
	f.int("encodedUpdateBytes", e.Bytes)
	if g, ok := e.Effect.Get(); ok {
		f.bool("stateVectorChanged", g.Changed())
		f.str("applyEffect", string(g.ApplyEffect()))
		f.str("stateVectorBeforeHash", g.BeforeHash())
		f.str("stateVectorAfterHash", g.AfterHash())
	}
	f.u32("sequence", e.Sequence)
	renderStages(f, e.Stages)
}
func (e SyncDiffApplied) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
	c.optMs("applyLatencyMs", e.ApplyLatencyMs)
	if g, ok := e.Effect.Get(); ok && (!validDigest(g.BeforeHash()) || !validDigest(g.AfterHash())) {
		c.fail("stateVectorBeforeHash", "effect group not built with NewSVEffect")
	}
	checkStages(c, e.Stages)
	c.positive("sequence", e.Sequence)
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
func (e UpdateSent) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
	f.u32("sequence", e.Sequence)
	f.optMs("sendQueueMs", e.SendQueueMs)
}
func (e UpdateSent) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
	c.optMs("sendQueueMs", e.SendQueueMs)
	c.positive("sequence", e.Sequence)
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
func (e UpdateApplied) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
	f.optMs("applyLatencyMs", e.ApplyLatencyMs)
	f.u32("sequence", e.Sequence)
	renderStages(f, e.Stages)
}
func (e UpdateApplied) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
	c.optMs("applyLatencyMs", e.ApplyLatencyMs)
	checkStages(c, e.Stages)
	c.positive("sequence", e.Sequence)
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
func (e UpdateAcked) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
	f.optMs("ackLatencyMs", e.AckLatencyMs)
	f.u32("sequence", e.Sequence)
}
func (e UpdateAcked) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
	c.optMs("ackLatencyMs", e.AckLatencyMs)
	c.positive("sequence", e.Sequence)
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
func (e DegradedBypassApplied) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
	f.u32("sequence", e.Sequence)
}
func (e DegradedBypassApplied) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
	c.positive("sequence", e.Sequence)
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
func (e ChunkedUpdateSent) render(f *fields) {
	renderChunkedSent(f, e.ConnectionID, e.NamespaceID, e.TransferID, e.ChunkCount, e.TotalBytes)
}
func (e ChunkedUpdateSent) check(c *checker) {
	checkChunkedSent(c, e.ConnectionID, e.NamespaceID, e.TransferID, e.ChunkCount)
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
func (e ChunkedUpdateApplied) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
	f.u32("chunkCount", e.ChunkCount)
	f.optMs("applyLatencyMs", e.ApplyLatencyMs)
}
func (e ChunkedUpdateApplied) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
	c.optMs("applyLatencyMs", e.ApplyLatencyMs)
	c.positive("chunkCount", e.ChunkCount)
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
func (e ChunkedUpdateAcked) render(f *fields) {
	renderChunkedAcked(f, e.ConnectionID, e.NamespaceID, e.Bytes, e.AckLatencyMs)
}
func (e ChunkedUpdateAcked) check(c *checker) {
	checkChunkedAcked(c, e.ConnectionID, e.NamespaceID, e.Bytes, e.AckLatencyMs)
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
func (e ChunkedSnapshotSent) render(f *fields) {
	renderChunkedSent(f, e.ConnectionID, e.NamespaceID, e.TransferID, e.ChunkCount, e.TotalBytes)
}
func (e ChunkedSnapshotSent) check(c *checker) {
	checkChunkedSent(c, e.ConnectionID, e.NamespaceID, e.TransferID, e.ChunkCount)
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
func (e ChunkedSnapshotApplied) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
	f.u32("chunkCount", e.ChunkCount)
	f.optMs("applyLatencyMs", e.ApplyLatencyMs)
}
func (e ChunkedSnapshotApplied) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
	c.optMs("applyLatencyMs", e.ApplyLatencyMs)
	c.positive("chunkCount", e.ChunkCount)
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
func (e ChunkedSnapshotAcked) render(f *fields) {
	renderChunkedAcked(f, e.ConnectionID, e.NamespaceID, e.Bytes, e.AckLatencyMs)
}
func (e ChunkedSnapshotAcked) check(c *checker) {
	checkChunkedAcked(c, e.ConnectionID, e.NamespaceID, e.Bytes, e.AckLatencyMs)
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
func (e ChunkedSyncSent) render(f *fields) {
	renderChunkedSent(f, e.ConnectionID, e.NamespaceID, e.TransferID, e.ChunkCount, e.TotalBytes)
	f.u32("syncRoundId", e.SyncRoundID)
}
func (e ChunkedSyncSent) check(c *checker) {
	checkChunkedSent(c, e.ConnectionID, e.NamespaceID, e.TransferID, e.ChunkCount)
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
func (e ChunkedSyncApplied) render(f *fields) {
	renderNsBytes(f, e.ConnectionID, e.NamespaceID, e.Bytes)
	f.u32("chunkCount", e.ChunkCount)
	f.u32("syncRoundId", e.SyncRoundID)
	f.optMs("applyLatencyMs", e.ApplyLatencyMs)
}
func (e ChunkedSyncApplied) check(c *checker) {
	checkNsBytes(c, e.ConnectionID, e.NamespaceID, e.Bytes)
	c.optMs("applyLatencyMs", e.ApplyLatencyMs)
	c.positive("chunkCount", e.ChunkCount)
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
func (e ChunkedSyncAcked) render(f *fields) {
	renderChunkedAcked(f, e.ConnectionID, e.NamespaceID, e.Bytes, e.AckLatencyMs)
}
func (e ChunkedSyncAcked) check(c *checker) {
	checkChunkedAcked(c, e.ConnectionID, e.NamespaceID, e.Bytes, e.AckLatencyMs)
}

func renderChunkedSent(f *fields, conn Opt[string], ns string, transferID, chunkCount, totalBytes uint32) {
	f.connID(conn)
	f.str("namespaceId", ns)
	f.u32("transferId", transferID)
	f.u32("chunkCount", chunkCount)
	f.u32("totalBytes", totalBytes)
}

func renderChunkedAcked(f *fields, conn Opt[string], ns string, bytes int, ack Opt[float64]) {
	renderNsBytes(f, conn, ns, bytes)
	f.optMs("ackLatencyMs", ack)
}

func checkChunkedAcked(c *checker, conn Opt[string], ns string, bytes int, ack Opt[float64]) {
	checkNsBytes(c, conn, ns, bytes)
	c.optMs("ackLatencyMs", ack)
}

func checkChunkedSent(c *checker, conn Opt[string], ns string, transferID, chunkCount uint32) {
	checkConnNs(c, conn, ns)
	c.positive("transferId", transferID)
	c.positive("chunkCount", chunkCount)
}

func checkConnNs(c *checker, conn Opt[string], ns string) {
	c.connID(conn)
	c.namespaceID(ns)
}

// ---- Auth, backpressure, resync -------------------------------------------------

// AuthUpgradeRejected is `auth-upgrade-rejected` (hub): a WebSocket upgrade
// refused before any connection exists, hence no connectionId key at all.
type AuthUpgradeRejected struct {
	Reason AuthRejectReason
}

func (AuthUpgradeRejected) Type() Type         { return TypeAuthUpgradeRejected }
func (e AuthUpgradeRejected) render(f *fields) { f.str("reason", string(e.Reason)) }
func (e AuthUpgradeRejected) check(c *checker) { c.member("reason", e.Reason) }

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

func (s QueueSample) render(f *fields) {
	f.int("updateBytes", s.UpdateBytes)
	f.int("maxUpdateBytes", s.MaxUpdateBytes)
	f.int("queuedUpdateCount", s.QueuedUpdateCount)
	f.int("queuedUpdateBytes", s.QueuedUpdateBytes)
	f.int("inFlightCount", s.InFlightCount)
	f.str("channelState", string(s.ChannelState))
	f.str("connectionState", string(s.ConnectionState))
	f.optInt("bufferedAmount", s.BufferedAmount)
}

func (s QueueSample) check(c *checker, channel ChannelState) {
	c.count("updateBytes", s.UpdateBytes)
	c.count("maxUpdateBytes", s.MaxUpdateBytes)
	c.count("queuedUpdateCount", s.QueuedUpdateCount)
	c.count("queuedUpdateBytes", s.QueuedUpdateBytes)
	c.count("inFlightCount", s.InFlightCount)
	if s.ChannelState != channel {
		c.fail("channelState", "must be %q in this event, got %q", channel, s.ChannelState)
	}
	c.connState("connectionState", s.ConnectionState)
	c.optCount("bufferedAmount", s.BufferedAmount)
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
func (e ResyncRequired) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("namespaceId", e.NamespaceID)
	f.str("cause", string(e.Cause))
	if g, ok := e.SendFailure.Get(); ok {
		f.str("reason", string(g.Reason))
		g.QueueSample.render(f)
	}
}
func (e ResyncRequired) check(c *checker) {
	checkConnNs(c, e.ConnectionID, e.NamespaceID)
	c.member("cause", e.Cause)
	g, ok := e.SendFailure.Get()
	switch {
	case ok != (e.Cause == ResyncSendFailed):
		c.fail("reason", "the send-failed group must be present exactly when cause is send-failed")
	case ok:
		c.member("reason", g.Reason)
		g.QueueSample.check(c, ChannelNeedsResync)
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
func (e UpdateDropped) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("namespaceId", e.NamespaceID)
	f.str("reason", string(e.Reason))
	e.QueueSample.render(f)
}
func (e UpdateDropped) check(c *checker) {
	checkConnNs(c, e.ConnectionID, e.NamespaceID)
	c.member("reason", e.Reason)
	e.QueueSample.check(c, ChannelLive)
}

// SendPaused is `send-paused` (hub/peer): bufferedAmount crossed the high water
// mark and dequeuing paused.
type SendPaused struct {
	ConnectionID   Opt[string]
	BufferedAmount int
}

func (SendPaused) Type() Type { return TypeSendPaused }
func (e SendPaused) render(f *fields) {
	f.connID(e.ConnectionID)
	f.int("bufferedAmount", e.BufferedAmount)
}
func (e SendPaused) check(c *checker) {
	c.connID(e.ConnectionID)
	c.count("bufferedAmount", e.BufferedAmount)
}

// SendResumed is `send-resumed` (hub/peer): bufferedAmount fell to the low water
// mark and dequeuing resumed.
type SendResumed struct {
	ConnectionID   Opt[string]
	BufferedAmount int
}

func (SendResumed) Type() Type { return TypeSendResumed }
func (e SendResumed) render(f *fields) {
	f.connID(e.ConnectionID)
	f.int("bufferedAmount", e.BufferedAmount)
}
func (e SendResumed) check(c *checker) {
	c.connID(e.ConnectionID)
	c.count("bufferedAmount", e.BufferedAmount)
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
func (e ConnectionFailed) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("code", string(e.Code))
	f.int("wsCloseCode", e.WSCloseCode)
}
func (e ConnectionFailed) check(c *checker) {
	c.connID(e.ConnectionID)
	c.member("code", e.Code)
	if e.WSCloseCode < 1000 || e.WSCloseCode > 4999 {
		c.fail("wsCloseCode", "%d is not a WebSocket close code", e.WSCloseCode)
	}
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
func (e NamespaceError) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("namespaceId", e.NamespaceID)
	f.str("code", string(e.Code))
	f.str("direction", string(e.Direction))
	if t, ok := e.TerminalState.Get(); ok {
		f.str("terminalState", string(t))
	}
}
func (e NamespaceError) check(c *checker) {
	checkConnNs(c, e.ConnectionID, e.NamespaceID)
	c.member("code", e.Code)
	c.member("direction", e.Direction)
	if t, ok := e.TerminalState.Get(); ok {
		c.member("terminalState", t)
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
func (e NamespaceFailed) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("namespaceId", e.NamespaceID)
	f.str("cause", string(e.Cause))
	f.optU64("timeoutMs", e.TimeoutMs)
}
func (e NamespaceFailed) check(c *checker) {
	checkConnNs(c, e.ConnectionID, e.NamespaceID)
	c.member("cause", e.Cause)
	if e.TimeoutMs.Present() && !e.Cause.Timer() {
		c.fail("timeoutMs", "only the timer causes carry timeoutMs, not %q", e.Cause)
	}
}

// IdentityConflicted is `identity-conflicted` (hub/peer): a namespace entered
// conflicted.
type IdentityConflicted struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Via          ConflictVia
}

func (IdentityConflicted) Type() Type { return TypeIdentityConflicted }
func (e IdentityConflicted) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("namespaceId", e.NamespaceID)
	f.str("via", string(e.Via))
}
func (e IdentityConflicted) check(c *checker) {
	checkConnNs(c, e.ConnectionID, e.NamespaceID)
	c.member("via", e.Via)
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
func (e ChunkedUpdateAborted) render(f *fields) {
	renderAborted(f, e.NamespaceID, e.TransferID, e.Reason, e.ReceivedChunks, e.ReceivedBytes)
}
func (e ChunkedUpdateAborted) check(c *checker) {
	checkAborted(c, e.NamespaceID, e.TransferID, e.Reason, e.ReceivedChunks, e.ReceivedBytes)
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
func (e ChunkedSnapshotAborted) render(f *fields) {
	renderAborted(f, e.NamespaceID, e.TransferID, e.Reason, e.ReceivedChunks, e.ReceivedBytes)
}
func (e ChunkedSnapshotAborted) check(c *checker) {
	checkAborted(c, e.NamespaceID, e.TransferID, e.Reason, e.ReceivedChunks, e.ReceivedBytes)
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
func (e ChunkedSyncAborted) render(f *fields) {
	renderAborted(f, e.NamespaceID, e.TransferID, e.Reason, e.ReceivedChunks, e.ReceivedBytes)
}
func (e ChunkedSyncAborted) check(c *checker) {
	checkAborted(c, e.NamespaceID, e.TransferID, e.Reason, e.ReceivedChunks, e.ReceivedBytes)
}

func renderAborted(f *fields, ns string, transferID uint32, reason AbortReason, chunks, bytes int) {
	f.str("namespaceId", ns)
	f.u32("transferId", transferID)
	f.str("reason", string(reason))
	f.int("receivedChunks", chunks)
	f.int("receivedBytes", bytes)
}

func checkAborted(c *checker, ns string, transferID uint32, reason AbortReason, chunks, bytes int) {
	c.namespaceID(ns)
	c.member("reason", reason)
	c.count("receivedChunks", chunks)
	c.count("receivedBytes", bytes)
	c.positive("transferId", transferID)
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
func (e SchemaRearmApplied) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("namespaceId", e.NamespaceID)
	f.str("semanticFingerprint", e.SemanticFingerprint)
	f.nullableStr("updatedAt", e.UpdatedAt)
}
func (e SchemaRearmApplied) check(c *checker) {
	checkConnNs(c, e.ConnectionID, e.NamespaceID)
	if !ValidSemanticFingerprint(e.SemanticFingerprint) {
		c.fail("semanticFingerprint", "must match sha256:v1:<64 lowercase hex>")
	}
	if v, ok := e.UpdatedAt.Get(); ok && !validUpdatedAt(v) {
		c.fail("updatedAt", "not a timestamp (build it with SchemaUpdatedAt)")
	}
}

// SchemaRearmFailed is `schema-rearm-failed` (peer): a schema re-arm failed
// fatally and the channel closes.
type SchemaRearmFailed struct {
	ConnectionID Opt[string]
	NamespaceID  string
	Code         SchemaRearmCode
}

func (SchemaRearmFailed) Type() Type { return TypeSchemaRearmFailed }
func (e SchemaRearmFailed) render(f *fields) {
	f.connID(e.ConnectionID)
	f.str("namespaceId", e.NamespaceID)
	f.str("code", string(e.Code))
}
func (e SchemaRearmFailed) check(c *checker) {
	checkConnNs(c, e.ConnectionID, e.NamespaceID)
	c.member("code", e.Code)
}
