package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
	"time"
)

// checkClassified fails unless err is an *Error whose code is registered in its scope.
func checkClassified(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("unclassified error %T: %v", err, err)
	}
	if _, ok := e.Spec(); !ok {
		t.Fatalf("error code %s not registered in scope %v", e.Code, e.Scope)
	}
	if e.Scope == ScopeNamespace && e.Namespace.IsZero() {
		t.Fatalf("namespace error %s without namespace", e.Code)
	}
	return e
}

// FuzzDecodeFrame: decoding any message never panics, fails only with a classified error, and
// a decoded frame re-encodes to the same bytes and survives the frame JSON.
func FuzzDecodeFrame(f *testing.F) {
	for _, v := range loadGolden(f) {
		b, _ := hex.DecodeString(v.Hex)
		f.Add(b, v.Chunked, uint32(0))
	}
	for _, v := range loadBad(f) {
		b, _ := hex.DecodeString(v.Hex)
		f.Add(b, v.Chunked, uint32(v.MaxUpdateBytes))
	}
	f.Fuzz(func(t *testing.T, msg []byte, chunked bool, maxUpdate uint32) {
		lim := testLimits()
		if maxUpdate != 0 {
			lim.MaxUpdateBytes = int(maxUpdate % (1 << 20))
		}
		var caps Capability
		if chunked {
			caps = CapChunkedUpdate
		}
		c := NewCodec(lim, caps)
		fr, err := c.Decode(msg)
		if err != nil {
			checkClassified(t, err)
			return
		}
		again, err := c.AppendFrame(nil, fr.Sequence, fr.Message)
		if err != nil {
			t.Fatalf("decoded %#v does not re-encode: %v", fr.Message, err)
		}
		if !bytes.Equal(again, msg) {
			t.Fatalf("re-encoded %x\nfrom      %x", again, msg)
		}
		back, err := ParseFrameJSON(AppendFrameJSON(nil, fr))
		if err != nil || !reflect.DeepEqual(back, fr) {
			t.Fatalf("frame JSON round trip: %v", err)
		}
	})
}

// FuzzAssembler drives an assembler with decoded chunk frames, clock steps and discards, and
// checks it against a model: failures are classified namespace errors, at most the configured
// number of assemblies exist, and a completed transfer is exactly the bytes of its accepted
// chunks, in order.
//
// Input: records of [op] …; op%4 == 0: advance the clock by next byte seconds and Expire;
// op%4 == 1: Discard the namespace picked by the next byte; otherwise a frame: u16 length,
// then that many bytes, decoded with CAP_CHUNKED_UPDATE and fed to Add when it is a chunk.
func FuzzAssembler(f *testing.F) {
	record := func(frames ...[]byte) []byte {
		var b []byte
		for _, fr := range frames {
			b = append(b, 2)
			b = binary.BigEndian.AppendUint16(b, uint16(len(fr)))
			b = append(b, fr...)
		}
		return b
	}
	var chunkFrames [][]byte
	for _, v := range loadGolden(f) {
		if v.Chunked {
			b, _ := hex.DecodeString(v.Hex)
			chunkFrames = append(chunkFrames, b)
		}
	}
	f.Add(record(chunkFrames...))
	for i := 0; i+1 < len(chunkFrames); i++ {
		f.Add(record(chunkFrames[i], chunkFrames[i+1]))
	}
	cfg := DefaultConfig()
	cfg.MaxUpdateBytes = 16
	cfg.MaxChunkedUpdateBytes, cfg.MaxChunkedBootstrapBytes, cfg.MaxChunkedSyncDiffBytes = 200, 200, 200
	cfg.MaxChunksPerUpdate = 16
	cfg.MaxConcurrentAssembliesPerConnection = 2
	var split []byte
	for i, k := range []ChunkKind{KindLiveUpdate, KindSnapshot, KindSyncDiff} {
		s, _ := NewSplitter(&cfg, k, nsA, uint32(i+1), payload(40), want(k))
		for c, ok := s.Next(); ok; c, ok = s.Next() {
			fr, _ := NewCodec(cfg.Limits(), CapChunkedUpdate).AppendFrame(nil, 1, c)
			split = append(split, record(fr)...)
		}
		split = append(split, 0, 31) // a clock step after each transfer
	}
	f.Add(split)

	f.Fuzz(func(t *testing.T, data []byte) {
		clock := newFakeClock()
		a := NewAssembler(&cfg, clock)
		codec := NewCodec(cfg.Limits(), CapChunkedUpdate)
		model := map[transferKey][]byte{}
		nss := []NamespaceID{nsA, nsB}
		for len(data) > 0 {
			op := data[0]
			data = data[1:]
			switch {
			case op%4 == 0 && len(data) > 0:
				clock.Advance(time.Duration(data[0]) * time.Second)
				data = data[1:]
				for _, ab := range a.Expire() {
					delete(model, transferKey{ab.Namespace, ab.TransferID})
				}
			case op%4 == 1 && len(data) > 0:
				ns := nss[int(data[0])%2]
				data = data[1:]
				for _, ab := range a.Discard(ns, AbortChannelTeardown) {
					k := transferKey{ab.Namespace, ab.TransferID}
					if ab.ReceivedBytes != len(model[k]) {
						t.Fatalf("abort reports %d bytes, model %d", ab.ReceivedBytes, len(model[k]))
					}
					delete(model, k)
				}
			case len(data) >= 2:
				n := int(binary.BigEndian.Uint16(data))
				data = data[2:]
				n = min(n, len(data))
				frame := data[:n]
				data = data[n:]
				fr, err := codec.Decode(frame)
				if err != nil {
					checkClassified(t, err)
					continue
				}
				c, ok := fr.Message.(*UpdateChunk)
				if !ok {
					continue
				}
				key := transferKey{c.NamespaceID, c.TransferID}
				tr, err := a.Add(c, fr.Sequence, want(c.Kind))
				if err != nil {
					if e := checkClassified(t, err); e.Scope != ScopeNamespace || e.Namespace != c.NamespaceID {
						t.Fatalf("assembler error %v not scoped to the chunk's namespace", e)
					}
					delete(model, key)
					continue
				}
				model[key] = append(model[key], c.Bytes...)
				if tr.ReceivedBytes != len(model[key]) {
					t.Fatalf("progress %d bytes, model %d", tr.ReceivedBytes, len(model[key]))
				}
				if tr.Complete {
					if !bytes.Equal(tr.Data, model[key]) || len(tr.Data) != int(tr.TotalBytes) {
						t.Fatalf("completed transfer differs from its chunks")
					}
					delete(model, key)
				} else if tr.Data != nil {
					t.Fatal("partial data handed out")
				}
			default:
				data = nil
			}
			if a.Len() > cfg.MaxConcurrentAssembliesPerConnection || a.Len() != len(model) {
				t.Fatalf("%d assemblies, model %d", a.Len(), len(model))
			}
		}
	})
}
