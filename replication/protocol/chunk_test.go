package protocol

import (
	"bytes"
	"math"
	"runtime"
	"testing"
	"time"
)

// chunkConfig: small chunks so tests stay fast (maxUpdateBytes 1 KiB, 64 chunks, 64 KiB per
// transfer).
func chunkConfig() *Config {
	c := DefaultConfig()
	c.MaxUpdateBytes = 1 << 10
	c.MaxChunkedUpdateBytes, c.MaxChunkedBootstrapBytes, c.MaxChunkedSyncDiffBytes = 64<<10, 32<<10, 16<<10
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return &c
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

func split(t *testing.T, cfg *Config, k ChunkKind, ns NamespaceID, id uint32, data []byte, b Binding) []*UpdateChunk {
	t.Helper()
	s, err := NewSplitter(cfg, k, ns, id, data, b)
	if err != nil {
		t.Fatal(err)
	}
	var out []*UpdateChunk
	for c, ok := s.Next(); ok; c, ok = s.Next() {
		out = append(out, c)
	}
	return out
}

var (
	snapBinding = Binding{ReplicationID: replID, ReplicationEpoch: 3}
	syncBinding = Binding{SyncRoundID: 7}
)

// TestS10_3_SplitAndReassembleThroughTheCodec: every kind, through encode and decode.
func TestS10_3_SplitAndReassembleThroughTheCodec(t *testing.T) {
	cfg := chunkConfig()
	codec := NewCodec(cfg.Limits(), CapChunkedUpdate)
	for _, k := range []struct {
		kind ChunkKind
		size int
		bind Binding
	}{
		{KindLiveUpdate, 64 << 10, Binding{}}, {KindSnapshot, 5000, snapBinding}, {KindSyncDiff, 1, syncBinding},
	} {
		data := payload(k.size)
		chunks := split(t, cfg, k.kind, nsA, 1, data, k.bind)
		if want := (k.size + 1023) / 1024; len(chunks) != want {
			t.Fatalf("%v: %d chunks, want %d", k.kind, len(chunks), want)
		}
		a := NewAssembler(cfg, newFakeClock())
		for i, c := range chunks {
			if (i == 0 && k.kind != KindLiveUpdate) != c.HasBinding() {
				t.Fatalf("%v chunk %d binding", k.kind, i)
			}
			seq := uint32(100 + i)
			f, err := codec.Decode(encode(t, seq, c))
			if err != nil {
				t.Fatal(err)
			}
			tr, err := a.Add(f.Message.(*UpdateChunk), f.Sequence, k.bind)
			if err != nil {
				t.Fatalf("%v chunk %d: %v", k.kind, i, err)
			}
			if tr.ReceivedChunks != uint32(i+1) || tr.ReceivedBytes != min((i+1)*1024, k.size) || tr.Binding != k.bind {
				t.Fatalf("%v progress %+v", k.kind, tr)
			}
			last := i == len(chunks)-1
			if tr.Complete != last || (tr.Data != nil) != last {
				t.Fatalf("%v chunk %d: complete %v with %d bytes (partial data must never leave)", k.kind, i, tr.Complete, len(tr.Data))
			}
			if last && (!bytes.Equal(tr.Data, data) || tr.AckSequence != seq || tr.TotalBytes != uint32(k.size)) {
				t.Fatalf("%v: reassembled %d bytes, ack %d", k.kind, len(tr.Data), tr.AckSequence)
			}
		}
		if a.Len() != 0 {
			t.Fatal("completed assembly still held")
		}
	}
}

// TestS10_3_SplitterIsLazyAndAliases: chunks are slices of the caller's buffer, made one at
// a time.
func TestS10_3_SplitterIsLazyAndAliases(t *testing.T) {
	cfg := chunkConfig()
	data := payload(3000)
	s, err := NewSplitter(cfg, KindLiveUpdate, nsA, 9, data, Binding{})
	if err != nil {
		t.Fatal(err)
	}
	if s.ChunkCount() != 3 || s.Remaining() != 3 {
		t.Fatalf("%d chunks", s.ChunkCount())
	}
	for i := 0; i < 3; i++ {
		c, ok := s.Next()
		if !ok || &c.Bytes[0] != &data[i*1024] || c.ChunkIndex != uint32(i) || c.TotalBytes != 3000 || c.TransferID != 9 {
			t.Fatalf("chunk %d: %+v", i, c)
		}
		if cap(c.Bytes) != len(c.Bytes) {
			t.Fatal("a chunk's capacity reaches into the next chunk")
		}
		if s.Remaining() != 2-i {
			t.Fatal("remaining")
		}
	}
	if _, ok := s.Next(); ok {
		t.Fatal("chunk after the last")
	}
}

func TestS10_3_SplitterRefusesWhatTheReceiverRefuses(t *testing.T) {
	cfg := chunkConfig()
	cases := []struct {
		name string
		kind ChunkKind
		n    int
		b    Binding
		want ErrorCode
	}{
		{"live update over its cap", KindLiveUpdate, 64<<10 + 1, Binding{}, CodeUpdateTransferTooLarge},
		{"snapshot over its cap", KindSnapshot, 32<<10 + 1, snapBinding, CodeSnapshotTransferTooLarge},
		{"sync diff over its cap", KindSyncDiff, 16<<10 + 1, syncBinding, CodeSyncTransferTooLarge},
		{"empty", KindLiveUpdate, 0, Binding{}, CodeMalformedFrame},
		{"snapshot without identity", KindSnapshot, 10, Binding{}, CodeMalformedFrame},
		{"live update with a binding", KindLiveUpdate, 10, syncBinding, CodeMalformedFrame},
		{"unknown kind", 3, 10, Binding{}, CodeMalformedFrame},
	}
	for _, c := range cases {
		if _, err := NewSplitter(cfg, c.kind, nsA, 1, payload(c.n), c.b); codeOf(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	small := *cfg
	small.MaxChunksPerUpdate = 2
	small.MaxChunkedUpdateBytes = 1 << 20
	if _, err := NewSplitter(&small, KindLiveUpdate, nsA, 1, payload(2049), Binding{}); codeOf(err) != CodeUpdateTransferTooLarge {
		t.Errorf("over maxChunksPerUpdate: %v", err)
	}
}

// first returns a first chunk of kind k declaring total bytes in count chunks.
func first(k ChunkKind, ns NamespaceID, id, count, total uint32, n int) *UpdateChunk {
	c := &UpdateChunk{Kind: k, NamespaceID: ns, TransferID: id, ChunkCount: count, TotalBytes: total, Bytes: payload(n)}
	switch k {
	case KindSnapshot:
		c.ReplicationID, c.ReplicationEpoch = snapBinding.ReplicationID, snapBinding.ReplicationEpoch
	case KindSyncDiff:
		c.SyncRoundID = syncBinding.SyncRoundID
	}
	return c
}

func next(c *UpdateChunk, index uint32, n int) *UpdateChunk {
	d := *c
	d.ChunkIndex, d.Bytes = index, payload(n)
	d.ReplicationID, d.ReplicationEpoch, d.SyncRoundID = "", 0, 0
	return &d
}

func want(k ChunkKind) Binding {
	switch k {
	case KindSnapshot:
		return snapBinding
	case KindSyncDiff:
		return syncBinding
	}
	return Binding{}
}

// TestS10_3_FirstChunkRules: declared bounds (TOO_LARGE), geometry, transferId order, binding
// and the per-connection cap (VIOLATION or the binding codes), with the kind's own codes.
func TestS10_3_FirstChunkRules(t *testing.T) {
	cfg := chunkConfig()
	for _, k := range []ChunkKind{KindLiveUpdate, KindSnapshot, KindSyncDiff} {
		capTotal := uint32(cfg.MaxChunkedBytes(k))
		cases := []struct {
			name  string
			chunk *UpdateChunk
			bind  Binding
			want  ErrorCode
		}{
			{"totalBytes over the kind's cap", first(k, nsA, 1, 64, capTotal+1, 10), want(k), k.TooLargeCode()},
			{"chunkCount over maxChunksPerUpdate", first(k, nsA, 1, 65, 100, 10), want(k), k.TooLargeCode()},
			{"totalBytes over chunkCount × maxUpdateBytes", first(k, nsA, 1, 2, 2049, 10), want(k), k.ViolationCode()},
			{"fewer bytes than chunks", first(k, nsA, 1, 4, 3, 1), want(k), k.ViolationCode()},
			{"single chunk shorter than totalBytes", first(k, nsA, 1, 1, 11, 10), want(k), k.ViolationCode()},
		}
		if k == KindSnapshot {
			cases = append(cases,
				struct {
					name  string
					chunk *UpdateChunk
					bind  Binding
					want  ErrorCode
				}{"replicationId differs from OPEN_OK", first(k, nsA, 1, 2, 20, 10), Binding{ReplicationID: "ffffffffffffffffffffffffffffffff", ReplicationEpoch: 3}, CodeReplicationIDMismatch},
				struct {
					name  string
					chunk *UpdateChunk
					bind  Binding
					want  ErrorCode
				}{"replicationEpoch differs from OPEN_OK", first(k, nsA, 1, 2, 20, 10), Binding{ReplicationID: replID, ReplicationEpoch: 4}, CodeReplicationEpochMismatch})
		}
		if k == KindSyncDiff {
			cases = append(cases, struct {
				name  string
				chunk *UpdateChunk
				bind  Binding
				want  ErrorCode
			}{"another round", first(k, nsA, 1, 2, 20, 10), Binding{SyncRoundID: 8}, CodeSyncStateViolation})
		}
		for _, c := range cases {
			a := NewAssembler(cfg, newFakeClock())
			_, err := a.Add(c.chunk, 42, c.bind)
			e, ok := err.(*Error)
			if !ok || e.Code != c.want || e.Scope != ScopeNamespace || e.Namespace != nsA || e.Sequence != 42 {
				t.Errorf("%v %s: %#v, want %s", k, c.name, err, c.want)
			}
			if a.Len() != 0 {
				t.Errorf("%v %s: refused transfer kept", k, c.name)
			}
		}
	}
}

// TestS10_3_TransferIDOrder: from 1, strictly increasing per namespace, shared by all kinds;
// gaps allowed; each namespace has its own counter.
func TestS10_3_TransferIDOrder(t *testing.T) {
	cfg := chunkConfig()
	a := NewAssembler(cfg, newFakeClock())
	ok := func(c *UpdateChunk) {
		t.Helper()
		if _, err := a.Add(c, 1, want(c.Kind)); err != nil {
			t.Fatal(err)
		}
	}
	ok(first(KindLiveUpdate, nsA, 1, 1, 5, 5))
	ok(first(KindSyncDiff, nsA, 2, 1, 5, 5))
	ok(first(KindSnapshot, nsA, 5, 1, 5, 5)) // a gap
	ok(first(KindLiveUpdate, nsB, 1, 1, 5, 5))
	for _, c := range []*UpdateChunk{
		first(KindLiveUpdate, nsA, 5, 1, 5, 5), // repeated, other kind
		first(KindSyncDiff, nsA, 3, 1, 5, 5),   // backwards
	} {
		if _, err := a.Add(c, 1, want(c.Kind)); codeOf(err) != c.Kind.ViolationCode() {
			t.Errorf("transferId %d after 5: %v", c.TransferID, err)
		}
	}
	// A discarded transfer's id stays used.
	a = NewAssembler(cfg, newFakeClock())
	ok(first(KindLiveUpdate, nsA, 1, 2, 10, 5))
	a.Discard(nsA, AbortResyncDeclared)
	if _, err := a.Add(first(KindLiveUpdate, nsA, 1, 2, 10, 5), 1, Binding{}); codeOf(err) != CodeUpdateTransferViolation {
		t.Errorf("restarting a discarded transfer id: %v", err)
	}
	ok(first(KindLiveUpdate, nsA, 2, 2, 10, 5))
}

// TestS10_3_FollowUpRules: each cross-frame rule, with the assembly's kind code; the broken
// transfer is dropped.
func TestS10_3_FollowUpRules(t *testing.T) {
	cfg := chunkConfig()
	for _, k := range []ChunkKind{KindLiveUpdate, KindSnapshot, KindSyncDiff} {
		f := first(k, nsA, 1, 3, 2500, 1024)
		cases := []struct {
			name string
			c    *UpdateChunk
		}{
			{"unknown transfer", func() *UpdateChunk { c := next(f, 1, 1024); c.TransferID = 2; return c }()},
			{"chunkCount differs", func() *UpdateChunk { c := next(f, 1, 1024); c.ChunkCount = 4; return c }()},
			{"totalBytes differs", func() *UpdateChunk { c := next(f, 1, 1024); c.TotalBytes = 2600; return c }()},
			{"index skips", next(f, 2, 452)},
			{"index repeats", func() *UpdateChunk { c := next(f, 1, 1024); c.ChunkIndex = 0; return c }()},
			{"kind differs", func() *UpdateChunk { c := next(f, 1, 1024); c.Kind = (k + 1) % 3; return c }()},
			{"bytes over maxUpdateBytes", next(f, 1, 1025)},
		}
		for _, c := range cases {
			a := NewAssembler(cfg, newFakeClock())
			if _, err := a.Add(f, 1, want(k)); err != nil {
				t.Fatal(err)
			}
			if c.name == "index repeats" {
				// chunkIndex 0 again reads as a new transfer reusing the id.
				c.c.ReplicationID, c.c.ReplicationEpoch, c.c.SyncRoundID = f.ReplicationID, f.ReplicationEpoch, f.SyncRoundID
			}
			if _, err := a.Add(c.c, 2, want(k)); codeOf(err) != k.ViolationCode() {
				t.Errorf("%v %s: %v, want %s", k, c.name, err, k.ViolationCode())
			}
			if c.name != "unknown transfer" && a.Len() != 0 {
				t.Errorf("%v %s: broken transfer kept", k, c.name)
			}
		}
		// Σbytes over totalBytes, and a complete transfer one byte short.
		a := NewAssembler(cfg, newFakeClock())
		a.Add(f, 1, want(k))
		a.Add(next(f, 1, 1024), 2, want(k))
		if _, err := a.Add(next(f, 2, 453), 3, want(k)); codeOf(err) != k.ViolationCode() {
			t.Errorf("%v Σbytes over totalBytes: %v", k, err)
		}
		a = NewAssembler(cfg, newFakeClock())
		a.Add(f, 1, want(k))
		a.Add(next(f, 1, 1024), 2, want(k))
		if tr, err := a.Add(next(f, 2, 451), 3, want(k)); codeOf(err) != k.ViolationCode() || tr.Data != nil {
			t.Errorf("%v complete but short: %v", k, err)
		}
	}
}

// TestS10_3_ConcurrencyCapPerConnection: the (max+1)-th concurrent assembly is a namespace
// VIOLATION of its kind; the others continue, and a slot frees when one completes.
func TestS10_3_ConcurrencyCapPerConnection(t *testing.T) {
	cfg := chunkConfig() // 4 concurrent
	a := NewAssembler(cfg, newFakeClock())
	namespaces := []NamespaceID{
		MustNamespaceID("ns-00000000000000000000000000000001"), MustNamespaceID("ns-00000000000000000000000000000002"),
		MustNamespaceID("ns-00000000000000000000000000000003"), MustNamespaceID("ns-00000000000000000000000000000004"),
	}
	firsts := make([]*UpdateChunk, 4)
	for i, ns := range namespaces {
		firsts[i] = first(KindLiveUpdate, ns, 1, 2, 20, 10)
		if _, err := a.Add(firsts[i], 1, Binding{}); err != nil {
			t.Fatal(err)
		}
	}
	extra := first(KindSyncDiff, nsB, 1, 2, 20, 10)
	_, err := a.Add(extra, 9, syncBinding)
	if e, ok := err.(*Error); !ok || e.Code != CodeSyncTransferViolation || e.Namespace != nsB || e.Scope != ScopeNamespace {
		t.Fatalf("fifth assembly: %#v", err)
	}
	if a.Len() != 4 {
		t.Fatal("the refused assembly disturbed the others")
	}
	if tr, err := a.Add(next(firsts[0], 1, 10), 2, Binding{}); err != nil || !tr.Complete {
		t.Fatalf("completing one: %v", err)
	}
	if _, err := a.Add(first(KindSyncDiff, nsB, 2, 2, 20, 10), 3, syncBinding); err != nil {
		t.Fatalf("after a slot freed: %v", err)
	}
}

// TestS10_3_SlidingAssemblyTimeout: the deadline is reset by every chunk, read from the
// injected clock, and its expiry reports the kind's consequence.
func TestS10_3_SlidingAssemblyTimeout(t *testing.T) {
	cfg := chunkConfig()
	clock := newFakeClock()
	a := NewAssembler(cfg, clock)
	if _, ok := a.NextDeadline(); ok {
		t.Fatal("deadline without assemblies")
	}
	live := first(KindLiveUpdate, nsA, 1, 3, 30, 10)
	snap := first(KindSnapshot, nsB, 1, 3, 30, 10)
	a.Add(live, 1, Binding{})
	clock.Advance(10 * time.Second)
	a.Add(snap, 2, snapBinding)
	if d, _ := a.NextDeadline(); !d.Equal(clock.Now().Add(20 * time.Second)) {
		t.Fatalf("next deadline %v", d)
	}
	clock.Advance(19 * time.Second) // 29 s after live's first chunk: still alive
	if got := a.Expire(); len(got) != 0 {
		t.Fatalf("expired early: %+v", got)
	}
	a.Add(next(live, 1, 10), 3, Binding{}) // resets live's deadline
	clock.Advance(11 * time.Second)        // 30 s after snap's chunk, 11 s after live's
	got := a.Expire()
	if len(got) != 1 || got[0] != (Abort{Kind: KindSnapshot, Namespace: nsB, TransferID: 1, Reason: AbortTimeout, ReceivedChunks: 1, ReceivedBytes: 10}) {
		t.Fatalf("expired %+v", got)
	}
	if got[0].Kind.ExpiredFailure() != CodeBootstrapFailed || got[0].Kind.ExpiredResyncReason() != "" {
		t.Fatal("a snapshot timeout fails the namespace with BOOTSTRAP_FAILED")
	}
	clock.Advance(19*time.Second - time.Millisecond)
	if got := a.Expire(); len(got) != 0 {
		t.Fatalf("expired early: %+v", got)
	}
	clock.Advance(time.Millisecond)
	got = a.Expire()
	if len(got) != 1 || got[0].Namespace != nsA || got[0].ReceivedChunks != 2 || got[0].ReceivedBytes != 20 {
		t.Fatalf("expired %+v", got)
	}
	if KindLiveUpdate.ExpiredResyncReason() != ResyncUpdateTransferExpired || KindSyncDiff.ExpiredResyncReason() != ResyncSyncTransferExpired || KindLiveUpdate.ExpiredFailure() != "" {
		t.Fatal("timeout consequences")
	}
	if _, err := a.Add(next(live, 2, 10), 4, Binding{}); codeOf(err) != CodeUpdateTransferViolation {
		t.Fatalf("chunk after expiry: %v", err)
	}
}

// TestS10_3_DiscardReportsProgress: teardown paths drop partial assemblies with their reason.
func TestS10_3_DiscardReportsProgress(t *testing.T) {
	cfg := chunkConfig()
	a := NewAssembler(cfg, newFakeClock())
	a.Add(first(KindLiveUpdate, nsA, 1, 3, 30, 10), 1, Binding{})
	a.Add(first(KindSyncDiff, nsA, 2, 3, 30, 10), 2, syncBinding)
	a.Add(first(KindSnapshot, nsB, 1, 3, 30, 10), 3, snapBinding)
	got := a.Discard(nsA, AbortEpochFence)
	if len(got) != 2 || got[0].TransferID != 1 || got[1].TransferID != 2 || got[1].Kind != KindSyncDiff || got[0].Reason != AbortEpochFence {
		t.Fatalf("discard %+v", got)
	}
	if a.Len() != 1 {
		t.Fatal("other namespace dropped")
	}
	got = a.DiscardAll(AbortConnectionTeardown)
	if len(got) != 1 || got[0].Namespace != nsB || got[0].Reason != AbortConnectionTeardown || a.Len() != 0 {
		t.Fatalf("discard all %+v", got)
	}
	if len(a.DiscardAll(AbortConnectionTeardown)) != 0 {
		t.Fatal("second teardown reported again")
	}
}

// TestS10_3_AllocatesOnce: the buffer is allocated once, at the first chunk, at its final
// size; chunks are copied in without regrowth.
func TestS10_3_AllocatesOnce(t *testing.T) {
	cfg := chunkConfig()
	data := payload(64 << 10)
	chunks := split(t, cfg, KindLiveUpdate, nsA, 1, data, Binding{})
	var before, after runtime.MemStats
	var a *Assembler
	id := uint32(0)
	run := func() {
		id++
		for i, c := range chunks {
			c.TransferID = id
			if _, err := a.Add(c, uint32(i+1), Binding{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	a = NewAssembler(cfg, newFakeClock())
	run()
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		run()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > uint64(len(data))+2048 {
		t.Fatalf("%d bytes allocated per %d-byte transfer", per, len(data))
	}
	if n := testing.AllocsPerRun(runs, run); n > 3 {
		t.Fatalf("%.0f allocations per transfer of %d chunks", n, len(chunks))
	}
	// A first chunk whose declared size fails a check allocates nothing of that size.
	huge := first(KindLiveUpdate, nsB, 1, math.MaxUint32, math.MaxUint32, 10)
	runtime.ReadMemStats(&before)
	for range runs {
		a.Add(huge, 1, Binding{})
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 4096 {
		t.Fatalf("%d bytes allocated per refused huge first chunk", per)
	}
}

func TestS10_3_TransferIDs(t *testing.T) {
	var ids TransferIDs
	for want := uint32(1); want <= 3; want++ {
		if id, err := ids.Next(nsA); err != nil || id != want {
			t.Fatalf("%d %v", id, err)
		}
	}
	if id, _ := ids.Next(nsB); id != 1 {
		t.Fatal("namespaces share a counter")
	}
	ids.last[nsB] = math.MaxUint32
	if _, err := ids.Next(nsB); err == nil {
		t.Fatal("transfer ids wrapped")
	}
}
