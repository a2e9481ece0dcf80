package observertest

import o "github.com/nomicore/nomicore/observer"

// Sample is one event type with every optional key set (Full) and with none set
// (Minimal).
type Sample struct {
	Type    o.Type
	Full    o.Event
	Minimal o.Event
}

// Fixed, valid identifiers used by the samples.
const (
	SampleNamespaceID  = "ns-0123456789abcdef0123456789abcdef"
	SampleConnectionID = "c-1f2e3d4c"
	SampleFingerprint  = "sha256:v1:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	SampleUpdatedAt    = "2025-01-02T03:04:05.678Z"
)

// Samples returns one hand-built Sample per event type, in the contract's order,
// each with a side the type allows (peer where both are allowed). The values are
// valid and safe; tests use them as inputs for renderings and adapters.
func Samples() []Sample {
	conn := o.Some(SampleConnectionID)
	const ns = SampleNamespaceID
	ms := func(v float64) o.Opt[float64] { return o.Some(v) }
	stages := o.Some(o.Stages{QueueWaitMs: 1, ProtectedCheckMs: 2, LiveApplyMs: 3, DirtyNotifyMs: 4})
	sample := o.QueueSample{UpdateBytes: 600000, MaxUpdateBytes: 524288, QueuedUpdateCount: 3,
		QueuedUpdateBytes: 4096, InFlightCount: 32, ChannelState: o.ChannelNeedsResync,
		ConnectionState: o.ConnReady, BufferedAmount: o.Some(65536)}
	dropped := sample
	dropped.ChannelState = o.ChannelLive
	droppedMin := dropped
	droppedMin.BufferedAmount = o.None[int]()

	peer, hub := o.SidePeer, o.SideHub
	s := func(side o.Side, full, min o.Payload) Sample {
		return Sample{Type: full.Type(), Full: o.Event{Side: side, Payload: full}, Minimal: o.Event{Side: side, Payload: min}}
	}
	return []Sample{
		s(peer, o.ConnectionStateChanged{ConnectionID: conn, From: o.ConnHandshaking, To: o.ConnReady},
			o.ConnectionStateChanged{From: o.ConnConnecting, To: o.ConnHandshaking}),
		s(peer, o.ConnectionBackoffScheduled{Attempt: 3, DelayMs: 812.5, Reason: o.BackoffSocketClosed},
			o.ConnectionBackoffScheduled{Attempt: 0, DelayMs: 0, Reason: o.BackoffDialFailed}),
		s(peer, o.GoAwayReceived{ConnectionID: conn, ReasonCode: o.GoAwayServerRestarting, DrainTimeoutMs: 10000, RetryAfterMs: o.Some[uint64](5000)},
			o.GoAwayReceived{ReasonCode: o.GoAwayOther, DrainTimeoutMs: 10000}),
		s(peer, o.EventLoopDelaySampled{ConnectionID: conn, DelayMs: 12.25},
			o.EventLoopDelaySampled{DelayMs: 0}),
		s(peer, o.ChannelStateChanged{ConnectionID: conn, NamespaceID: ns, From: o.ChannelReconciling, To: o.ChannelLive},
			o.ChannelStateChanged{NamespaceID: ns, From: o.ChannelTargeted, To: o.ChannelOpening}),
		s(hub, o.BootstrapSnapshotSent{ConnectionID: conn, NamespaceID: ns, Bytes: 2048},
			o.BootstrapSnapshotSent{NamespaceID: ns, Bytes: 2048}),
		s(peer, o.BootstrapImported{ConnectionID: conn, NamespaceID: ns, Bytes: 2048},
			o.BootstrapImported{NamespaceID: ns, Bytes: 2048}),
		s(peer, o.SyncStep2Sent{ConnectionID: conn, NamespaceID: ns, Bytes: 2, SyncRoundID: 7},
			o.SyncStep2Sent{NamespaceID: ns, Bytes: 2, SyncRoundID: 7}),
		s(peer, o.SyncDiffApplied{ConnectionID: conn, NamespaceID: ns, Bytes: 40, ApplyLatencyMs: ms(10), SyncRoundID: 7,
			Effect: o.Some(o.NewSVEffect([]byte{1, 5, 3}, []byte{1, 5, 4})), Sequence: 12, Stages: stages},
			o.SyncDiffApplied{NamespaceID: ns, Bytes: 2, SyncRoundID: 7, Sequence: 12}),
		s(peer, o.UpdateSent{ConnectionID: conn, NamespaceID: ns, Bytes: 31, Sequence: 40, SendQueueMs: ms(0.5)},
			o.UpdateSent{NamespaceID: ns, Bytes: 31, Sequence: 40}),
		s(peer, o.UpdateApplied{ConnectionID: conn, NamespaceID: ns, Bytes: 31, ApplyLatencyMs: ms(10), Sequence: 41, Stages: stages},
			o.UpdateApplied{NamespaceID: ns, Bytes: 31, Sequence: 41}),
		s(peer, o.UpdateAcked{ConnectionID: conn, NamespaceID: ns, Bytes: 31, AckLatencyMs: ms(25), Sequence: 40},
			o.UpdateAcked{NamespaceID: ns, Bytes: 31, Sequence: 40}),
		s(peer, o.DegradedBypassApplied{ConnectionID: conn, NamespaceID: ns, Bytes: 31, Sequence: 42},
			o.DegradedBypassApplied{NamespaceID: ns, Bytes: 31, Sequence: 42}),
		s(peer, o.ChunkedUpdateSent{ConnectionID: conn, NamespaceID: ns, TransferID: 1, ChunkCount: 3, TotalBytes: 1200000},
			o.ChunkedUpdateSent{NamespaceID: ns, TransferID: 1, ChunkCount: 3, TotalBytes: 1200000}),
		s(peer, o.ChunkedUpdateApplied{ConnectionID: conn, NamespaceID: ns, Bytes: 1200000, ChunkCount: 3, ApplyLatencyMs: ms(80)},
			o.ChunkedUpdateApplied{NamespaceID: ns, Bytes: 1200000, ChunkCount: 3}),
		s(peer, o.ChunkedUpdateAcked{ConnectionID: conn, NamespaceID: ns, Bytes: 1200000, AckLatencyMs: ms(120)},
			o.ChunkedUpdateAcked{NamespaceID: ns, Bytes: 1200000}),
		s(hub, o.ChunkedSnapshotSent{ConnectionID: conn, NamespaceID: ns, TransferID: 2, ChunkCount: 4, TotalBytes: 2000000},
			o.ChunkedSnapshotSent{NamespaceID: ns, TransferID: 2, ChunkCount: 4, TotalBytes: 2000000}),
		s(peer, o.ChunkedSnapshotApplied{ConnectionID: conn, NamespaceID: ns, Bytes: 2000000, ChunkCount: 4, ApplyLatencyMs: ms(200)},
			o.ChunkedSnapshotApplied{NamespaceID: ns, Bytes: 2000000, ChunkCount: 4}),
		s(hub, o.ChunkedSnapshotAcked{ConnectionID: conn, NamespaceID: ns, Bytes: 2000000, AckLatencyMs: ms(300)},
			o.ChunkedSnapshotAcked{NamespaceID: ns, Bytes: 2000000}),
		s(peer, o.ChunkedSyncSent{ConnectionID: conn, NamespaceID: ns, TransferID: 3, ChunkCount: 2, TotalBytes: 700000, SyncRoundID: 8},
			o.ChunkedSyncSent{NamespaceID: ns, TransferID: 3, ChunkCount: 2, TotalBytes: 700000, SyncRoundID: 8}),
		s(peer, o.ChunkedSyncApplied{ConnectionID: conn, NamespaceID: ns, Bytes: 700000, ChunkCount: 2, SyncRoundID: 8, ApplyLatencyMs: ms(60)},
			o.ChunkedSyncApplied{NamespaceID: ns, Bytes: 700000, ChunkCount: 2, SyncRoundID: 8}),
		s(peer, o.ChunkedSyncAcked{ConnectionID: conn, NamespaceID: ns, Bytes: 700000, AckLatencyMs: ms(90)},
			o.ChunkedSyncAcked{NamespaceID: ns, Bytes: 700000}),
		s(hub, o.AuthUpgradeRejected{Reason: o.AuthInvalidCredentials},
			o.AuthUpgradeRejected{Reason: o.AuthMissingToken}),
		s(peer, o.ResyncRequired{ConnectionID: conn, NamespaceID: ns, Cause: o.ResyncSendFailed,
			SendFailure: o.Some(o.SendFailure{Reason: o.SendUpdateTooLarge, QueueSample: sample})},
			o.ResyncRequired{NamespaceID: ns, Cause: o.ResyncQueueOverflow}),
		s(peer, o.UpdateDropped{ConnectionID: conn, NamespaceID: ns, Reason: o.DropUpdateTooLarge, QueueSample: dropped},
			o.UpdateDropped{NamespaceID: ns, Reason: o.DropUpdateTooLarge, QueueSample: droppedMin}),
		s(peer, o.SendPaused{ConnectionID: conn, BufferedAmount: 1 << 20},
			o.SendPaused{BufferedAmount: 1 << 20}),
		s(peer, o.SendResumed{ConnectionID: conn, BufferedAmount: 1 << 18},
			o.SendResumed{BufferedAmount: 1 << 18}),
		s(peer, o.ConnectionFailed{ConnectionID: conn, Code: o.ConnErrPongTimeout, WSCloseCode: 1001},
			o.ConnectionFailed{Code: o.ConnErrHelloTimeout, WSCloseCode: 1002}),
		s(peer, o.NamespaceError{ConnectionID: conn, NamespaceID: ns, Code: o.NsErrAckTimeout, Direction: o.DirectionReceived,
			TerminalState: o.NsErrAckTimeout.TerminalState()},
			o.NamespaceError{NamespaceID: ns, Code: o.NsErrApplyFailed, Direction: o.DirectionSent}),
		s(peer, o.NamespaceFailed{ConnectionID: conn, NamespaceID: ns, Cause: o.FailedOpenTimeout, TimeoutMs: o.Some[uint64](15000)},
			o.NamespaceFailed{NamespaceID: ns, Cause: o.FailedRemoteError}),
		s(peer, o.IdentityConflicted{ConnectionID: conn, NamespaceID: ns, Via: o.ViaIdentityChangedFrame},
			o.IdentityConflicted{NamespaceID: ns, Via: o.ViaOpenMismatch}),
		s(peer, o.ChunkedUpdateAborted{NamespaceID: ns, TransferID: 4, Reason: o.AbortTimeout, ReceivedChunks: 1, ReceivedBytes: 524288},
			o.ChunkedUpdateAborted{NamespaceID: ns, TransferID: 4, Reason: o.AbortShed}),
		s(peer, o.ChunkedSnapshotAborted{NamespaceID: ns, TransferID: 5, Reason: o.AbortEpochFence, ReceivedChunks: 2, ReceivedBytes: 1048576},
			o.ChunkedSnapshotAborted{NamespaceID: ns, TransferID: 5, Reason: o.AbortConnectionTeardown}),
		s(peer, o.ChunkedSyncAborted{NamespaceID: ns, TransferID: 6, Reason: o.AbortResyncDeclared, ReceivedChunks: 1, ReceivedBytes: 10},
			o.ChunkedSyncAborted{NamespaceID: ns, TransferID: 6, Reason: o.AbortChannelTeardown}),
		s(peer, o.SchemaRearmApplied{ConnectionID: conn, NamespaceID: ns, SemanticFingerprint: SampleFingerprint, UpdatedAt: o.SchemaUpdatedAt(SampleUpdatedAt)},
			o.SchemaRearmApplied{NamespaceID: ns, SemanticFingerprint: SampleFingerprint}),
		s(peer, o.SchemaRearmFailed{ConnectionID: conn, NamespaceID: ns, Code: o.SchemaRearmInvalid},
			o.SchemaRearmFailed{NamespaceID: ns, Code: o.SchemaRearmInternal}),
	}
}
