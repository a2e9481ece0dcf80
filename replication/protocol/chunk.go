package protocol

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/nomicore/nomicore/clock"
)

// Binding is what a transfer's first chunk binds it to: the replication identity of a
// snapshot or the sync round of a sync diff. Live updates have none.
type Binding struct {
	ReplicationID    string
	ReplicationEpoch uint64
	SyncRoundID      uint32
}

// ExpiredResyncReason is the RESYNC_REQUIRED reasonCode that follows an assembly timeout of
// kind k: UPDATE_TRANSFER_EXPIRED for a live update, SYNC_TRANSFER_EXPIRED for a
// sync diff; "" for a snapshot, whose timeout fails the namespace instead (ExpiredFailure).
func (k ChunkKind) ExpiredResyncReason() string { return k.rule().ExpiredResync }

// ExpiredFailure is the terminal namespace failure that follows an assembly timeout of kind
// k: BOOTSTRAP_FAILED for a snapshot, "" for the kinds that resync instead.
func (k ChunkKind) ExpiredFailure() ErrorCode { return k.rule().ExpiredFailure }

// AbortReason is why a partial assembly was discarded: the ChunkedUpdateAbortReason
// vocabulary of the observer events (docs/protocol.md#events; append-only).
type AbortReason string

const (
	AbortTimeout            AbortReason = "timeout"             // the sliding assemblyTimeoutMs deadline passed
	AbortShed               AbortReason = "shed"                // connection backpressure shed the namespace
	AbortResyncDeclared     AbortReason = "resync-declared"     // RESYNC_REQUIRED, sent or received
	AbortChannelTeardown    AbortReason = "channel-teardown"    // namespace close or terminal state
	AbortConnectionTeardown AbortReason = "connection-teardown" // disconnect, GOAWAY drain, stop
	AbortEpochFence         AbortReason = "epoch-fence"         // identity fence (an epoch bump)
)

// Abort reports one discarded partial assembly, with its progress, for the
// chunked-*-aborted observer events.
type Abort struct {
	Kind           ChunkKind
	Namespace      NamespaceID
	TransferID     uint32
	Reason         AbortReason
	ReceivedChunks uint32
	ReceivedBytes  int
}

// Transfer is the state of one assembly after a chunk was accepted.
type Transfer struct {
	Kind           ChunkKind
	Namespace      NamespaceID
	TransferID     uint32
	ChunkCount     uint32
	TotalBytes     uint32
	ReceivedChunks uint32
	ReceivedBytes  int
	Binding        Binding // from the first chunk (snapshot and sync-diff kinds)

	// Complete is set by the last chunk. Data then holds exactly TotalBytes bytes and belongs
	// to the caller; AckSequence is the last chunk's frame sequence, the ackedSequence of the
	// UPDATE_ACK, BOOTSTRAP_ACK or SYNC_APPLIED that settles the transfer.
	Complete    bool
	Data        []byte
	AckSequence uint32
}

type transferKey struct {
	ns NamespaceID
	id uint32
}

type assembly struct {
	kind       ChunkKind
	chunkCount uint32
	totalBytes uint32
	binding    Binding
	buf        []byte // received bytes; cap = totalBytes, allocated once
	received   uint32 // chunks received
	deadline   time.Time
}

// Assembler reassembles the chunked transfers arriving on one connection (its one inbound
// direction), keyed by (namespaceId, transferId), by the receiver rules of
// docs/protocol.md#receiver-rules for every kind. It enforces every first-chunk and
// follow-up rule, the transferId order, the per-connection cap on concurrent assemblies, and
// the sliding assemblyTimeoutMs deadline read from the injected Clock.
//
// The first chunk is checked against the declared bounds before anything is allocated; then
// the whole buffer is allocated once, chunks are copied into it, and it is handed out only when
// complete and exactly TotalBytes long. Partial data never leaves the assembler.
//
// Memory is bounded: at most maxConcurrentAssembliesPerConnection buffers of at most the
// largest chunked cap, plus one transfer id per namespace seen on the connection.
//
// Assembler is not a goroutine and not safe for concurrent use: the connection's single
// owner goroutine calls it, arms one timer for NextDeadline and calls Expire when it fires,
// and calls Discard or DiscardAll when a namespace or the connection is torn down.
type Assembler struct {
	maxUpdateBytes int
	maxTotal       [3]int // per ChunkKind
	maxChunks      int
	maxActive      int
	timeout        time.Duration
	clock          clock.Reader

	active map[transferKey]*assembly
	lastID map[NamespaceID]uint32 // highest transferId started per namespace
}

// NewAssembler returns an empty assembler with cfg's limits (cfg must be valid).
func NewAssembler(cfg *Config, clk clock.Reader) *Assembler {
	return &Assembler{
		maxUpdateBytes: cfg.MaxUpdateBytes,
		maxTotal:       [3]int{cfg.MaxChunkedUpdateBytes, cfg.MaxChunkedBootstrapBytes, cfg.MaxChunkedSyncDiffBytes},
		maxChunks:      cfg.MaxChunksPerUpdate,
		maxActive:      cfg.MaxConcurrentAssembliesPerConnection,
		timeout:        cfg.AssemblyTimeout,
		clock:          clk,
		active:         make(map[transferKey]*assembly),
		lastID:         make(map[NamespaceID]uint32),
	}
}

// Len returns the number of assemblies in progress.
func (a *Assembler) Len() int { return len(a.active) }

// Add takes one decoded chunk (so the codec's single-frame rules already hold) and the
// sequence of its frame. want is the binding the namespace's state requires of a first chunk:
// the OPEN_OK identity for a snapshot, the current round for a sync diff; it is ignored for
// live updates and follow-up chunks.
//
// A failure is a namespace-scope *Error with the kind's code: TOO_LARGE for declared bounds
// over the caps, VIOLATION for bad geometry, a cross-frame mismatch, a transferId out of order
// or an assembly over the per-connection cap; REPLICATION_ID_MISMATCH,
// REPLICATION_EPOCH_MISMATCH or SYNC_STATE_VIOLATION for a binding that differs from want. The
// transfer's partial data is dropped and no abort is reported: the namespace fails, and
// the caller discards its other assemblies as it tears the namespace down.
func (a *Assembler) Add(c *UpdateChunk, seq uint32, want Binding) (Transfer, error) {
	key := transferKey{c.NamespaceID, c.TransferID}
	var asm *assembly
	var err *Error
	if c.ChunkIndex == 0 {
		asm, err = a.start(key, c, want)
	} else {
		asm, err = a.follow(key, c)
	}
	if err != nil {
		delete(a.active, key)
		err.Type, err.Sequence, err.HasHeader = TypeUpdateChunk, seq, true
		return Transfer{}, err
	}
	asm.buf = append(asm.buf, c.Bytes...)
	asm.received++
	asm.deadline = a.clock.Now().Add(a.timeout)
	t := Transfer{
		Kind: asm.kind, Namespace: c.NamespaceID, TransferID: c.TransferID,
		ChunkCount: asm.chunkCount, TotalBytes: asm.totalBytes,
		ReceivedChunks: asm.received, ReceivedBytes: len(asm.buf), Binding: asm.binding,
	}
	if asm.received < asm.chunkCount {
		return t, nil
	}
	// Complete: the length must be exactly totalBytes.
	delete(a.active, key)
	if len(asm.buf) != int(asm.totalBytes) {
		return Transfer{}, a.violation(asm.kind, c, seq, fmt.Sprintf("complete transfer has %d bytes, declared %d", len(asm.buf), asm.totalBytes))
	}
	t.Complete, t.Data, t.AckSequence = true, asm.buf, seq
	return t, nil
}

// start checks a first chunk — its declared bounds and geometry, before anything is
// allocated — and allocates its assembly.
func (a *Assembler) start(key transferKey, c *UpdateChunk, want Binding) (*assembly, *Error) {
	k := c.Kind
	// transferId increases strictly from 1 and never wraps, per (connection, direction,
	// namespace), across all kinds.
	if last := a.lastID[key.ns]; c.TransferID <= last {
		return nil, a.violation0(k, c, fmt.Sprintf("transferId %d not above the last started %d", c.TransferID, last))
	}
	a.lastID[key.ns] = c.TransferID
	// Declared bounds: totalBytes ≤ the kind's cap ∧ chunkCount ≤ maxChunksPerUpdate.
	if int64(c.TotalBytes) > int64(a.maxTotal[k]) || int64(c.ChunkCount) > int64(a.maxChunks) {
		return nil, nsErr(k.TooLargeCode(), c.NamespaceID, fmt.Sprintf("declared %d bytes in %d chunks, caps %d bytes and %d chunks", c.TotalBytes, c.ChunkCount, a.maxTotal[k], a.maxChunks))
	}
	// Geometry: totalBytes ≤ chunkCount × maxUpdateBytes, and room for chunkCount non-empty chunks.
	if uint64(c.TotalBytes) > uint64(c.ChunkCount)*uint64(a.maxUpdateBytes) || c.TotalBytes < c.ChunkCount {
		return nil, a.violation0(k, c, fmt.Sprintf("%d bytes cannot be %d chunks of 1..%d bytes", c.TotalBytes, c.ChunkCount, a.maxUpdateBytes))
	}
	if err := a.checkSize(k, c, 0); err != nil {
		return nil, err
	}
	// Binding block: the transfer must belong to the namespace's current state.
	var b Binding
	switch k {
	case KindSnapshot:
		b = Binding{ReplicationID: c.ReplicationID, ReplicationEpoch: c.ReplicationEpoch}
		if c.ReplicationID != want.ReplicationID {
			return nil, nsErr(CodeReplicationIDMismatch, c.NamespaceID, "snapshot chunk replicationId differs from OPEN_OK")
		}
		if c.ReplicationEpoch != want.ReplicationEpoch {
			return nil, nsErr(CodeReplicationEpochMismatch, c.NamespaceID, "snapshot chunk replicationEpoch differs from OPEN_OK")
		}
	case KindSyncDiff:
		b = Binding{SyncRoundID: c.SyncRoundID}
		if c.SyncRoundID != want.SyncRoundID {
			return nil, nsErr(CodeSyncStateViolation, c.NamespaceID, fmt.Sprintf("sync-diff chunk for round %d during round %d", c.SyncRoundID, want.SyncRoundID))
		}
	}
	// More concurrent assemblies than maxConcurrentAssembliesPerConnection is the kind's
	// VIOLATION, a namespace error: the connection stays ready.
	if len(a.active) >= a.maxActive {
		return nil, a.violation0(k, c, fmt.Sprintf("a %d-th concurrent assembly on the connection", len(a.active)+1))
	}
	asm := &assembly{
		kind: k, chunkCount: c.ChunkCount, totalBytes: c.TotalBytes, binding: b,
		buf: make([]byte, 0, c.TotalBytes),
	}
	a.active[key] = asm
	return asm, nil
}

// follow checks a follow-up chunk against its assembly: the same transferId, totalBytes and
// chunkCount as the first chunk, chunkIndex equal to the chunks received so far, bytes at
// most maxUpdateBytes, and no more bytes in all than totalBytes.
func (a *Assembler) follow(key transferKey, c *UpdateChunk) (*assembly, *Error) {
	asm := a.active[key]
	if asm == nil {
		return nil, a.violation0(c.Kind, c, fmt.Sprintf("chunk %d of a transfer not in progress", c.ChunkIndex))
	}
	k := asm.kind
	switch {
	case c.Kind != k:
		return nil, a.violation0(k, c, fmt.Sprintf("chunk of kind %v in a %v transfer", c.Kind, k))
	case c.ChunkCount != asm.chunkCount || c.TotalBytes != asm.totalBytes:
		return nil, a.violation0(k, c, "chunkCount or totalBytes differ from the first chunk")
	case c.ChunkIndex != asm.received:
		return nil, a.violation0(k, c, fmt.Sprintf("chunk %d after %d received", c.ChunkIndex, asm.received))
	}
	if err := a.checkSize(k, c, len(asm.buf)); err != nil {
		return nil, err
	}
	return asm, nil
}

func (a *Assembler) checkSize(k ChunkKind, c *UpdateChunk, have int) *Error {
	if len(c.Bytes) == 0 || len(c.Bytes) > a.maxUpdateBytes {
		return a.violation0(k, c, fmt.Sprintf("chunk of %d bytes, allowed 1..%d", len(c.Bytes), a.maxUpdateBytes))
	}
	if have+len(c.Bytes) > int(c.TotalBytes) {
		return a.violation0(k, c, fmt.Sprintf("%d bytes received, over totalBytes %d", have+len(c.Bytes), c.TotalBytes))
	}
	return nil
}

func (a *Assembler) violation0(k ChunkKind, c *UpdateChunk, detail string) *Error {
	return nsErr(k.ViolationCode(), c.NamespaceID, detail)
}

func (a *Assembler) violation(k ChunkKind, c *UpdateChunk, seq uint32, detail string) *Error {
	e := a.violation0(k, c, detail)
	e.Type, e.Sequence, e.HasHeader = TypeUpdateChunk, seq, true
	return e
}

// NextDeadline returns the earliest deadline of the assemblies in progress, for the owner's
// timer; false when there are none.
func (a *Assembler) NextDeadline() (time.Time, bool) {
	var next time.Time
	for _, asm := range a.active {
		if next.IsZero() || asm.deadline.Before(next) {
			next = asm.deadline
		}
	}
	return next, !next.IsZero()
}

// Expire discards every assembly whose deadline has passed on the clock (no chunk for
// assemblyTimeoutMs) and reports each with reason timeout. For each, the contract prescribes
// what follows by kind: Kind.ExpiredResyncReason (RESYNC_REQUIRED) or Kind.ExpiredFailure
// (BOOTSTRAP_FAILED). Expire is the only place deadlines take effect: Add accepts a chunk
// whatever the time, so the owner's timer decides.
func (a *Assembler) Expire() []Abort {
	now := a.clock.Now()
	return a.discard(func(_ transferKey, asm *assembly) bool { return !now.Before(asm.deadline) }, AbortTimeout)
}

// Discard drops the assemblies of one namespace (channel teardown, a declared resync, a shed
// or an epoch fence) and reports them.
func (a *Assembler) Discard(ns NamespaceID, reason AbortReason) []Abort {
	return a.discard(func(k transferKey, _ *assembly) bool { return k.ns == ns }, reason)
}

// DiscardKind drops the assemblies of kind k of one namespace (the remote gave up its live
// updates) and reports them.
func (a *Assembler) DiscardKind(ns NamespaceID, k ChunkKind, reason AbortReason) []Abort {
	return a.discard(func(key transferKey, asm *assembly) bool { return key.ns == ns && asm.kind == k }, reason)
}

// DiscardAll drops every assembly (connection teardown) and reports them.
func (a *Assembler) DiscardAll(reason AbortReason) []Abort {
	return a.discard(func(transferKey, *assembly) bool { return true }, reason)
}

func (a *Assembler) discard(match func(transferKey, *assembly) bool, reason AbortReason) []Abort {
	var out []Abort
	for k, asm := range a.active {
		if match(k, asm) {
			delete(a.active, k)
			out = append(out, Abort{Kind: asm.kind, Namespace: k.ns, TransferID: k.id, Reason: reason,
				ReceivedChunks: asm.received, ReceivedBytes: len(asm.buf)})
		}
	}
	slices.SortFunc(out, func(x, y Abort) int {
		if c := cmp.Compare(x.Namespace.String(), y.Namespace.String()); c != 0 {
			return c
		}
		return cmp.Compare(x.TransferID, y.TransferID)
	})
	return out
}

// TransferIDs allocates the transfer ids of one connection's sending direction: per
// namespace 1, 2, 3, … shared by all kinds. Every transfer sends at least one frame
// and frames use up the uint32 sequence first, so the ids cannot run out before the
// connection's sequences do; Next still refuses to wrap. The zero value is ready to use; it
// is owned by the connection's sending goroutine.
type TransferIDs struct {
	last map[NamespaceID]uint32
}

// Next returns the next transfer id for ns.
func (t *TransferIDs) Next(ns NamespaceID) (uint32, error) {
	if t.last == nil {
		t.last = make(map[NamespaceID]uint32)
	}
	if t.last[ns] == math.MaxUint32 {
		return 0, connErr(CodeOutboundSequenceExhausted, "transfer ids of namespace "+ns.String()+" exhausted")
	}
	t.last[ns]++
	return t.last[ns], nil
}

// Splitter slices one transfer into UPDATE_CHUNK messages of at most maxUpdateBytes each,
// lazily: Next slices the following chunk on demand, when it is sent, and each chunk's Bytes
// aliases data, which must stay unmodified until the last chunk is encoded. Nothing is
// copied.
type Splitter struct {
	head  UpdateChunk // the fields every chunk shares, binding included
	data  []byte
	size  int
	index uint32
}

// NewSplitter prepares the chunks of data for a transfer of kind k in namespace ns. b is the
// first chunk's binding (the identity of a snapshot, the round of a sync diff; zero for live
// updates). It refuses a transfer the receiver would refuse: over the kind's totalBytes cap or
// maxChunksPerUpdate (the kind's TOO_LARGE code, namespace scope), or with invalid fields
// (MALFORMED_FRAME).
func NewSplitter(cfg *Config, k ChunkKind, ns NamespaceID, transferID uint32, data []byte, b Binding) (*Splitter, error) {
	if !k.Known() {
		return nil, malformed(TypeUpdateChunk, "kind", "not 0, 1 or 2")
	}
	size := cfg.MaxUpdateBytes
	count := (len(data) + size - 1) / size
	if len(data) > cfg.MaxChunkedBytes(k) || count > cfg.MaxChunksPerUpdate {
		return nil, nsErr(k.TooLargeCode(), ns, fmt.Sprintf("transfer of %d bytes in %d chunks over the caps (%d bytes, %d chunks)", len(data), count, cfg.MaxChunkedBytes(k), cfg.MaxChunksPerUpdate))
	}
	s := &Splitter{data: data, size: size, head: UpdateChunk{
		Kind: k, NamespaceID: ns, TransferID: transferID,
		ChunkCount: uint32(count), TotalBytes: uint32(len(data)),
		ReplicationID: b.ReplicationID, ReplicationEpoch: b.ReplicationEpoch, SyncRoundID: b.SyncRoundID,
	}}
	first := s.chunk(0)
	if first == nil {
		return nil, malformed(TypeUpdateChunk, "bytes", "empty")
	}
	if e := first.check(cfg.Limits()); e != nil {
		return nil, e
	}
	return s, nil
}

// ChunkCount returns the number of chunks of the transfer.
func (s *Splitter) ChunkCount() uint32 { return s.head.ChunkCount }

// Remaining returns the number of chunks Next has yet to return.
func (s *Splitter) Remaining() int { return int(s.head.ChunkCount - s.index) }

// Next returns the next chunk, or false after the last.
func (s *Splitter) Next() (*UpdateChunk, bool) {
	c := s.chunk(s.index)
	if c == nil {
		return nil, false
	}
	s.index++
	return c, true
}

func (s *Splitter) chunk(i uint32) *UpdateChunk {
	if i >= s.head.ChunkCount {
		return nil
	}
	c := s.head
	start := int(i) * s.size
	c.ChunkIndex = i
	c.Bytes = s.data[start:min(start+s.size, len(s.data)):min(start+s.size, len(s.data))]
	if i > 0 {
		c.ReplicationID, c.ReplicationEpoch, c.SyncRoundID = "", 0, 0
	}
	return &c
}
