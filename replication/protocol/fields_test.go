package protocol

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// handCoded is a message whose binary form is also written out by hand (fields.go).
type handCoded interface {
	Message
	appendFast(dst []byte) []byte
	sizeFast() int
	decodeFast(r *reader)
}

// fieldListInputs returns every sample message and every message of a golden vector.
func fieldListInputs(t *testing.T) []Message {
	t.Helper()
	var out []Message
	for _, s := range samples() {
		out = append(out, s.msg)
	}
	for _, v := range loadGolden(t) {
		f, err := ParseFrameJSON(v.Frame)
		if err != nil { // the golden tests say more; go on with the other inputs
			t.Errorf("golden %s: %v", v.Name, err)
			continue
		}
		out = append(out, f.Message)
	}
	// Values whose encodings take more than one byte per varUint.
	out = append(out,
		&Hello{PeerInstanceID: "p", ExpectedHubInstanceID: "h", ProtocolVersions: []uint64{1 << 52, 1 << 30, 300, 128, 127, 1}, RequiredCapabilities: 0xffffffff, ConnectionNonce: nonce},
		&Update{NamespaceID: nsB, Update: bytes.Repeat([]byte{0x80}, 20000)},
		&UpdateAck{NamespaceID: nsB, AckedSequence: 1<<32 - 1},
		&UpdateChunk{Kind: KindSnapshot, NamespaceID: nsB, TransferID: 1 << 31, ChunkIndex: 0, ChunkCount: 300, TotalBytes: 1 << 30, ReplicationID: replID, ReplicationEpoch: 1 << 50, Bytes: bytes.Repeat([]byte{0xfe}, 300)},
	)
	return out
}

// decodeBoth decodes payload into a fresh message of m's type twice, by the hand-written
// form and by walking the field list, and returns both outcomes.
func decodeBoth(m handCoded, payload []byte) (fast, walked Message, fastErr, walkedErr string) {
	outcome := func(r *reader) string {
		err := r.Finish()
		if err == nil {
			return "ok"
		}
		return r.field + ": " + err.Error()
	}
	fm := newMessage(m.Type()).(handCoded)
	var fr reader
	fr.Reset(payload)
	fm.decodeFast(&fr)
	wm := newMessage(m.Type())
	var wr reader
	wr.Reset(payload)
	decodeFields(wm, &wr)
	return fm, wm, outcome(&fr), outcome(&wr)
}

// TestS5_FastPathsFollowFieldLists: the hand-written binary forms of UPDATE, UPDATE_ACK,
// UPDATE_CHUNK and HELLO do exactly what walking their field lists does — the same bytes, room for them, and
// the same message or the same failure (field and offset) for every prefix and every
// single-byte corruption of a payload. A field added to a list and not to its fast path
// changes the encoding, so this fails.
func TestS5_FastPathsFollowFieldLists(t *testing.T) {
	seen := map[MessageType]bool{}
	for i, m := range fieldListInputs(t) {
		hc, ok := m.(handCoded)
		if !ok {
			continue
		}
		seen[m.Type()] = true
		name := fmt.Sprintf("%v #%d", m.Type(), i)
		walked := appendPayload(nil, m)
		if fast := hc.appendFast(nil); !bytes.Equal(fast, walked) {
			t.Fatalf("%s: hand-written encoding %x\nfield list gives       %x", name, fast, walked)
		}
		if n := hc.sizeFast(); n < len(walked) {
			t.Fatalf("%s: sizeFast %d is less than the %d bytes of the payload", name, n, len(walked))
		}
		inputs := [][]byte{walked}
		for n := range len(walked) {
			if n >= 64 && n < len(walked)-8 {
				continue // the middle of a long byte field is read in one piece
			}
			inputs = append(inputs, walked[:n])
			for _, b := range []byte{0x00, 0x01, 0x7f, 0x80, 0xff} {
				c := bytes.Clone(walked)
				c[n] = b
				inputs = append(inputs, c)
			}
		}
		inputs = append(inputs, append(bytes.Clone(walked), 0))
		for _, in := range inputs {
			fm, wm, fe, we := decodeBoth(hc, in)
			if fe != we || !reflect.DeepEqual(fm, wm) {
				t.Fatalf("%s: payload %x\nhand-written decode: %s %#v\nfield list decode:   %s %#v", name, in, fe, fm, we, wm)
			}
		}
		if fm, _, fe, _ := decodeBoth(hc, walked); fe != "ok" || !reflect.DeepEqual(fm, m) {
			t.Fatalf("%s: decodes to %#v (%s)", name, fm, fe)
		}
	}
	for _, typ := range []MessageType{TypeHello, TypeUpdate, TypeUpdateAck, TypeUpdateChunk} {
		if !seen[typ] {
			t.Errorf("no %v among the inputs", typ)
		}
	}
}

// TestS5_SizeHintIsExact: walking a field list for its size gives the length of the payload
// the same list encodes.
func TestS5_SizeHintIsExact(t *testing.T) {
	for _, m := range fieldListInputs(t) {
		if n, want := sizeHint(m), len(appendPayload(nil, m)); n != want {
			t.Errorf("%v: sizeHint %d, payload %d bytes", m.Type(), n, want)
		}
	}
}

// TestS5_WalkAllocatesNothing: walking any message's field list to size and encode it
// allocates nothing, so every type has its case in walk.
func TestS5_WalkAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 64<<10)
	for _, s := range samples() {
		if n := testing.AllocsPerRun(20, func() {
			buf = appendPayload(buf[:0], s.msg)
			_ = sizeHint(s.msg)
		}); n != 0 {
			t.Errorf("%s: %.1f allocations per walk", s.name, n)
		}
	}
}
