package protocol

import (
	"bytes"
	"testing"
)

// Benchmarks for the targets: decoding an UPDATE costs at most one allocation, and
// chunk reassembly runs at ≥ 1 GB/s.

func BenchmarkEncodeUpdate1KiB(b *testing.B) {
	m := &Update{NamespaceID: nsA, Update: bytes.Repeat([]byte{1}, 1024)}
	c := chunkedCodec()
	buf := make([]byte, 0, 2048)
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.AppendFrame(buf[:0], 1, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeUpdate1KiB(b *testing.B) {
	wire := encode(b, 1, &Update{NamespaceID: nsA, Update: bytes.Repeat([]byte{1}, 1024)})
	c := chunkedCodec()
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(wire); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeUpdateAck(b *testing.B) {
	m := &UpdateAck{NamespaceID: nsA, AckedSequence: 1 << 20}
	c := chunkedCodec()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.AppendFrame(buf[:0], 1, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeUpdateAck(b *testing.B) {
	wire := encode(b, 1, &UpdateAck{NamespaceID: nsA, AckedSequence: 1 << 20})
	c := chunkedCodec()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(wire); err != nil {
			b.Fatal(err)
		}
	}
}

func benchHello() *Hello {
	return &Hello{PeerInstanceID: "peer-a", ExpectedHubInstanceID: "hub", ProtocolVersions: []uint64{1}, OptionalCapabilities: CapChunkedUpdate, ConnectionNonce: nonce}
}

func BenchmarkEncodeHello(b *testing.B) {
	m := benchHello()
	c := chunkedCodec()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.AppendFrame(buf[:0], 1, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeHello(b *testing.B) {
	wire := encode(b, 1, benchHello())
	c := chunkedCodec()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(wire); err != nil {
			b.Fatal(err)
		}
	}
}

// chunkBenchConfig: 4 MiB transfers in 64 chunks of 64 KiB.
func chunkBenchConfig(b *testing.B) *Config {
	c := DefaultConfig()
	c.MaxUpdateBytes = 64 << 10
	if err := c.Validate(); err != nil {
		b.Fatal(err)
	}
	return &c
}

// BenchmarkChunkedUpdate4MiB: split a 4 MiB update into 64 chunks, encode each frame, decode
// it and reassemble: the whole path of a chunked transfer, sender and receiver.
func BenchmarkChunkedUpdate4MiB(b *testing.B) {
	cfg := chunkBenchConfig(b)
	data := payload(4 << 20)
	codec := NewCodec(cfg.Limits(), CapChunkedUpdate)
	a := NewAssembler(cfg, newFakeClock())
	buf := make([]byte, 0, cfg.MaxFrameBytes)
	id := uint32(0)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		id++
		s, err := NewSplitter(cfg, KindLiveUpdate, nsA, id, data, Binding{})
		if err != nil || s.ChunkCount() != 64 {
			b.Fatal(err)
		}
		seq := uint32(0)
		for c, ok := s.Next(); ok; c, ok = s.Next() {
			seq++
			if buf, err = codec.AppendFrame(buf[:0], seq, c); err != nil {
				b.Fatal(err)
			}
			f, err := codec.Decode(buf)
			if err != nil {
				b.Fatal(err)
			}
			tr, err := a.Add(f.Message.(*UpdateChunk), f.Sequence, Binding{})
			if err != nil {
				b.Fatal(err)
			}
			if tr.Complete && len(tr.Data) != len(data) {
				b.Fatal("short transfer")
			}
		}
	}
}

// BenchmarkReassemble4MiB: the assembler alone, 64 decoded chunks of 64 KiB per transfer.
func BenchmarkReassemble4MiB(b *testing.B) {
	cfg := chunkBenchConfig(b)
	data := payload(4 << 20)
	s, _ := NewSplitter(cfg, KindLiveUpdate, nsA, 1, data, Binding{})
	var chunks []*UpdateChunk
	for c, ok := s.Next(); ok; c, ok = s.Next() {
		chunks = append(chunks, c)
	}
	a := NewAssembler(cfg, newFakeClock())
	id := uint32(0)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		id++
		for i, c := range chunks {
			c.TransferID = id
			tr, err := a.Add(c, uint32(i+1), Binding{})
			if err != nil {
				b.Fatal(err)
			}
			if tr.Complete && len(tr.Data) != len(data) {
				b.Fatal("short transfer")
			}
		}
	}
}
