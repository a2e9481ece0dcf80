package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/nomicore/nomicore/internal/testkit"
)

// The golden vectors of testdata/golden come from an independent JS generator written against
// lib0 0.2.120 from the contract's field tables (docs/protocol.md#conformance); these tests
// check the Go codec against them in both directions.

type goldenVector struct {
	Name       string          `json:"name"`
	Chunked    bool            `json:"chunked"`
	DecodeOnly bool            `json:"decodeOnly"`
	Frame      json.RawMessage `json:"frame"`
	Hex        string          `json:"hex"`
}

type badVector struct {
	Name              string    `json:"name"`
	Hex               string    `json:"hex"`
	Chunked           bool      `json:"chunked"`
	MaxFrameBytes     int       `json:"maxFrameBytes"`
	MaxUpdateBytes    int       `json:"maxUpdateBytes"`
	MaxSyncDiffBytes  int       `json:"maxSyncDiffBytes"`
	MaxBootstrapBytes int       `json:"maxBootstrapBytes"`
	Error             ErrorCode `json:"error"`
	Note              string    `json:"note"`
}

func loadGolden(t testing.TB) []goldenVector {
	t.Helper()
	var f struct {
		Lib0    string         `json:"lib0"`
		Vectors []goldenVector `json:"vectors"`
	}
	readJSONFile(t, "../../testdata/golden/frames.json", &f)
	if len(f.Vectors) == 0 {
		t.Fatal("frames.json holds no vectors")
	}
	return f.Vectors
}

func loadBad(t testing.TB) []badVector {
	t.Helper()
	var f struct {
		Vectors []badVector `json:"vectors"`
	}
	readJSONFile(t, "../../testdata/golden/bad-frames.json", &f)
	if len(f.Vectors) == 0 {
		t.Fatal("bad-frames.json holds no vectors")
	}
	return f.Vectors
}

func readJSONFile(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden vectors: %v (regenerate with `make golden`)", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func (v goldenVector) bytes(t testing.TB) []byte {
	b, err := hex.DecodeString(v.Hex)
	if err != nil {
		t.Fatalf("%s: %v", v.Name, err)
	}
	return b
}

func (v goldenVector) codec() Codec {
	if v.Chunked {
		return chunkedCodec()
	}
	return NewCodec(testLimits(), 0)
}

// TestS22_GoldenFrames: decode(hex) == fields and encode(fields) == hex for every vector.
func TestS22_GoldenFrames(t *testing.T) {
	types := map[MessageType]bool{}
	for _, v := range loadGolden(t) {
		t.Run(v.Name, func(t *testing.T) {
			wire := v.bytes(t)
			// Decode direction: the frame JSON of what we decode equals the vector's.
			f, err := v.codec().Decode(wire)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got := AppendFrameJSON(nil, f); !testkit.SameJSON(t, got, v.Frame) {
				t.Fatalf("decoded %s\nwant    %s", got, v.Frame)
			}
			// Encode direction: the vector's fields encode to its bytes (also for the
			// decodeOnly unknown ERROR code, which this encoder accepts as decoded).
			want, err := ParseFrameJSON(v.Frame)
			if err != nil {
				t.Fatalf("frame JSON: %v", err)
			}
			if !reflect.DeepEqual(want, f) {
				t.Fatalf("frame JSON gives %#v\ndecode gives %#v", want.Message, f.Message)
			}
			enc, err := v.codec().AppendFrame(nil, want.Sequence, want.Message)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(enc, wire) {
				t.Fatalf("encoded %x\nwant    %x", enc, wire)
			}
			// docs/protocol.md#chunked-transfers: without CAP_CHUNKED_UPDATE the same 0x42
			// frame is refused before its payload.
			if v.Chunked {
				if _, err := NewCodec(testLimits(), 0).Decode(wire); codeOf(err) != CodeUnsupportedMessageType {
					t.Fatalf("0x42 without the capability: %v", err)
				}
			}
			types[f.Type()] = true
		})
	}
	if len(types) != 18 {
		t.Fatalf("golden vectors cover %d message types, want 18", len(types))
	}
}

// TestS22_GoldenBadFrames: every bad vector fails with its code, classified with the right
// scope (the size caps are namespace scope and carry the namespaceId).
func TestS22_GoldenBadFrames(t *testing.T) {
	for _, v := range loadBad(t) {
		t.Run(v.Name, func(t *testing.T) {
			wire, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			var caps Capability
			if v.Chunked {
				caps = CapChunkedUpdate
			}
			c := NewCodec(Limits{MaxFrameBytes: v.MaxFrameBytes, MaxUpdateBytes: v.MaxUpdateBytes,
				MaxSyncDiffBytes: v.MaxSyncDiffBytes, MaxBootstrapBytes: v.MaxBootstrapBytes}, caps)
			f, err := c.Decode(wire)
			if err == nil {
				t.Fatalf("decoded %#v; want %s (%s)", f.Message, v.Error, v.Note)
			}
			e := err.(*Error)
			if e.Code != v.Error {
				t.Fatalf("got %v\nwant %s (%s)", err, v.Error, v.Note)
			}
			spec, ok := e.Spec()
			if !ok {
				t.Fatalf("%s is not registered in scope %v", e.Code, e.Scope)
			}
			if spec.Scope == ScopeNamespace && e.Namespace.IsZero() {
				t.Fatalf("namespace-scope %s without its namespaceId", e.Code)
			}
		})
	}
}

// TestS22_TruncationAtEveryOffset cuts every golden frame at every byte offset, both as is
// (the envelope no longer matches) and with payloadLength patched to the shortened payload (the
// payload itself is truncated): every prefix fails with a classified code.
func TestS22_TruncationAtEveryOffset(t *testing.T) {
	for _, v := range loadGolden(t) {
		wire := v.bytes(t)
		c := v.codec()
		for n := 0; n < len(wire); n++ {
			cut := append([]byte(nil), wire[:n]...)
			want := CodeFrameLengthMismatch
			if n < HeaderLen {
				want = CodeMalformedFrame
			}
			if _, err := c.Decode(cut); codeOf(err) != want {
				t.Fatalf("%s cut at %d: %v, want %s", v.Name, n, err, want)
			}
			if n >= HeaderLen {
				binary.BigEndian.PutUint32(cut[12:16], uint32(n-HeaderLen))
				if _, err := c.Decode(cut); codeOf(err) != CodeMalformedFrame {
					t.Fatalf("%s payload cut at %d: %v, want MALFORMED_FRAME", v.Name, n, err)
				}
			}
		}
	}
}

// TestS22_LengthVariants: payloadLength one short, one long, overflowing; the message one
// byte long with and without a matching payloadLength (trailing bytes).
func TestS22_LengthVariants(t *testing.T) {
	for _, v := range loadGolden(t) {
		wire := v.bytes(t)
		c := v.codec()
		pl := binary.BigEndian.Uint32(wire[12:16])
		patched := func(b []byte, n uint32) []byte {
			b = append([]byte(nil), b...)
			binary.BigEndian.PutUint32(b[12:16], n)
			return b
		}
		cases := []struct {
			name string
			msg  []byte
			want ErrorCode
		}{
			{"payloadLength-1", patched(wire, pl-1), CodeFrameLengthMismatch},
			{"payloadLength+1", patched(wire, pl+1), CodeFrameLengthMismatch},
			{"payloadLength max", patched(wire, 0xffffffff), CodeFrameTooLarge},
			{"one byte appended", append(append([]byte(nil), wire...), 0), CodeFrameLengthMismatch},
			{"trailing byte", patched(append(append([]byte(nil), wire...), 0), pl+1), CodeMalformedFrame},
		}
		if pl == 0 {
			cases = cases[1:]
		}
		for _, k := range cases {
			if _, err := c.Decode(k.msg); codeOf(err) != k.want {
				t.Errorf("%s %s: %v, want %s", v.Name, k.name, err, k.want)
			}
		}
	}
}
