package protocol

import (
	"bytes"
	"testing"
	"time"
)

// Test fixtures shared by the tests of this package.

var (
	nsA = MustNamespaceID("ns-0123456789abcdef0123456789abcdef")
	nsB = MustNamespaceID("ns-fedcba9876543210fedcba9876543210")

	replID = "00112233445566778899aabbccddeeff"
	nonce  = [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
)

// testLimits are the default limits.
func testLimits() Limits {
	c := DefaultConfig()
	return c.Limits()
}

// chunkedCodec negotiates CAP_CHUNKED_UPDATE.
func chunkedCodec() Codec { return NewCodec(testLimits(), CapChunkedUpdate) }

// sample is one valid message of every type, and variants exercising optional fields.
type sample struct {
	name string
	msg  Message
}

func samples() []sample {
	return []sample{
		{"HELLO", &Hello{PeerInstanceID: "peer-a", ExpectedHubInstanceID: "hub", ProtocolVersions: []uint64{3, 2, 1}, RequiredCapabilities: 0, OptionalCapabilities: CapChunkedUpdate, ConnectionNonce: nonce}},
		{"HELLO_ACK", &HelloAck{HubInstanceID: "hub", ProtocolVersion: 1, SelectedCapabilities: CapChunkedUpdate, ConnectionNonce: nonce, ConnectionID: "conn-é-1"}},
		{"GOAWAY", &GoAway{ReasonCode: "SERVER_SHUTTING_DOWN", DrainTimeoutMs: 5000}},
		{"GOAWAY retry", &GoAway{ReasonCode: "SERVER_RESTARTING", DrainTimeoutMs: 1 << 40, RetryAfterMs: 250, HasRetryAfter: true}},
		{"ERROR connection", &ErrorMessage{Scope: ScopeConnection, Code: CodeFrameTooLarge, Fatal: true, Retryable: true, RelatedSequence: 9, HasRelatedSequence: true, SafeMessage: "frame too large"}},
		{"ERROR namespace", &ErrorMessage{Scope: ScopeNamespace, Code: CodeAckTimeout, Fatal: false, Retryable: true, NamespaceID: nsA, SafeMessage: ""}},
		{"ERROR unknown code", &ErrorMessage{Scope: ScopeNamespace, Code: "SOME_FUTURE_CODE", Fatal: false, Retryable: false, NamespaceID: nsB, SafeMessage: "x"}},
		{"OPEN_NAMESPACE bootstrap", &OpenNamespace{NamespaceID: nsA}},
		{"OPEN_NAMESPACE reconcile", &OpenNamespace{NamespaceID: nsA, HasLocalReplica: true, ReplicationID: replID, ReplicationEpoch: 3}},
		{"OPEN_OK", &OpenOK{NamespaceID: nsA, Mode: ModeReconcile, ReplicationID: replID, ReplicationEpoch: 1<<53 - 1}},
		{"CLOSE_NAMESPACE", &CloseNamespace{NamespaceID: nsA, ReasonCode: "target-removed"}},
		{"CLOSE_OK", &CloseOK{NamespaceID: nsA, AckedSequence: 4294967295}},
		{"BOOTSTRAP_SNAPSHOT", &BootstrapSnapshot{NamespaceID: nsA, ReplicationID: replID, ReplicationEpoch: 2, Snapshot: []byte{1, 2, 3}}},
		{"BOOTSTRAP_ACK", &BootstrapAck{NamespaceID: nsA, AckedSequence: 12}},
		{"IDENTITY_CHANGED", &IdentityChanged{NamespaceID: nsA, ReplicationID: replID, ReplicationEpoch: 4}},
		{"SYNC_STEP1", &SyncStep1{NamespaceID: nsA, SyncRoundID: 1, StateVector: []byte{0}}},
		{"SYNC_STEP2", &SyncStep2{NamespaceID: nsA, SyncRoundID: 1, RelatedStep1Sequence: 300, Update: []byte{0, 0}}},
		{"SYNC_STEP2 empty", &SyncStep2{NamespaceID: nsB, SyncRoundID: 128, RelatedStep1Sequence: 1, Update: []byte{}}},
		{"SYNC_APPLIED", &SyncApplied{NamespaceID: nsA, SyncRoundID: 1, AckedSequence: 301}},
		{"RESYNC_REQUIRED", &ResyncRequired{NamespaceID: nsA, ReasonCode: ResyncUpdateTransferExpired}},
		{"UPDATE", &Update{NamespaceID: nsA, Update: bytes.Repeat([]byte{0xab}, 200)}},
		{"UPDATE_ACK", &UpdateAck{NamespaceID: nsA, AckedSequence: 77}},
		{"PRESENCE", &Presence{NamespaceID: nsA, Awareness: []byte{1, 7, 2, 4, 'n', 'u', 'l', 'l'}}},
		{"UPDATE_CHUNK live", &UpdateChunk{Kind: KindLiveUpdate, NamespaceID: nsA, TransferID: 1, ChunkIndex: 0, ChunkCount: 2, TotalBytes: 5, Bytes: []byte{1, 2, 3}}},
		{"UPDATE_CHUNK snapshot first", &UpdateChunk{Kind: KindSnapshot, NamespaceID: nsA, TransferID: 2, ChunkIndex: 0, ChunkCount: 3, TotalBytes: 9, ReplicationID: replID, ReplicationEpoch: 5, Bytes: []byte{1, 2, 3}}},
		{"UPDATE_CHUNK snapshot next", &UpdateChunk{Kind: KindSnapshot, NamespaceID: nsA, TransferID: 2, ChunkIndex: 1, ChunkCount: 3, TotalBytes: 9, Bytes: []byte{4, 5, 6}}},
		{"UPDATE_CHUNK sync first", &UpdateChunk{Kind: KindSyncDiff, NamespaceID: nsB, TransferID: 3, ChunkIndex: 0, ChunkCount: 1, TotalBytes: 2, SyncRoundID: 7, Bytes: []byte{9, 9}}},
	}
}

// encode encodes m with the chunked codec and fails the test on error.
func encode(t testing.TB, seq uint32, m Message) []byte {
	t.Helper()
	b, err := NewCodec(testLimits(), KnownCapabilities).AppendFrame(nil, seq, m)
	if err != nil {
		t.Fatalf("encode %v: %v", m.Type(), err)
	}
	return b
}

// fakeClock is a manually advanced Clock.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }
