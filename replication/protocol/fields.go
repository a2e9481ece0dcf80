package protocol

import "github.com/nomicore/nomicore/lib0"

// Each message lists its payload fields once, in wire order, in its fields method:
//
//	func (m *UpdateAck) fields(w *walker) {
//		w.namespace("namespaceId", &m.NamespaceID)
//		w.u32("ackedSequence", &m.AckedSequence)
//	}
//
// Every call names the field (the contract's name, used by the frame JSON and in error
// details), its wire kind (the walker method) and where it lives (the pointer). The encoder,
// the decoder, the size hint and the frame JSON writer and reader are walks of that list;
// an optional field is an `if` on its presence marker, so a value the contract leaves out is
// left out by all five. Adding a field to a message is one line there (and a rule in check
// when the grammar alone does not constrain it).

// walkOp is what a walk over a message's fields does.
type walkOp uint8

const (
	opEncode    walkOp = iota // append each field's wire form to buf
	opDecode                  // read each field from r
	opSize                    // add each field's encoded size to n
	opWriteJSON               // append each field to the frame JSON in jw
	opReadJSON                // read each field from the frame JSON object in jr
)

// walker visits the fields of one message, doing its op to each. Reads through the decoder
// and the JSON reader are sticky: after the first failure every field reads as zero, and the
// failure names the field being read.
type walker struct {
	op  walkOp
	n   int         // opSize: the payload's size so far; opWriteJSON: the keys written
	buf []byte      // opEncode: the payload so far; opWriteJSON: the JSON text so far
	r   reader      // opDecode
	jr  *jsonReader // opReadJSON
}

// walk runs w over m's field list. The switch calls each type's fields method directly
// rather than through the Message interface: through the interface the walker would move to
// the heap, and every frame encoded or decoded would cost an allocation more. A type missing
// here still walks, with that allocation (TestS5_WalkAllocatesNothing catches it).
func walk(m Message, w *walker) {
	switch m := m.(type) {
	case *Hello:
		m.fields(w)
	case *HelloAck:
		m.fields(w)
	case *GoAway:
		m.fields(w)
	case *ErrorMessage:
		m.fields(w)
	case *OpenNamespace:
		m.fields(w)
	case *OpenOK:
		m.fields(w)
	case *CloseNamespace:
		m.fields(w)
	case *CloseOK:
		m.fields(w)
	case *BootstrapSnapshot:
		m.fields(w)
	case *BootstrapAck:
		m.fields(w)
	case *IdentityChanged:
		m.fields(w)
	case *SyncStep1:
		m.fields(w)
	case *SyncStep2:
		m.fields(w)
	case *SyncApplied:
		m.fields(w)
	case *ResyncRequired:
		m.fields(w)
	case *Update:
		m.fields(w)
	case *UpdateAck:
		m.fields(w)
	case *UpdateChunk:
		m.fields(w)
	case *Presence:
		m.fields(w)
	default: // a type without its case: the copy goes to the heap, and the walk works
		onHeap := *w
		m.fields(&onHeap)
		*w = onHeap
	}
}

// The walks the codec and the tests use. The messages the codec benchmarks time — UPDATE and
// UPDATE_ACK, which carry every live edit, UPDATE_CHUNK, which carries every large one, and
// HELLO — have their binary form written out by hand as well (appendFast, sizeFast and
// decodeFast, next to their field lists), which Codec.AppendFrame and Codec.Decode take
// instead: walking a list costs a call and a dispatch per field, measurably more than code
// written for one message.
// TestS5_FastPathsFollowFieldLists holds each hand-written form to its list, so a field added
// to the list and not to the fast path fails it. The frame JSON always walks the list.

// appendPayload appends the wire form of m's payload to dst.
func appendPayload(dst []byte, m Message) []byte {
	w := walker{op: opEncode, buf: dst}
	walk(m, &w)
	return w.buf
}

// sizeHint is the exact size of m's payload on the wire.
func sizeHint(m Message) int {
	w := walker{op: opSize}
	walk(m, &w)
	return w.n
}

// decodeFields reads m's payload fields from r; r records the first failure.
func decodeFields(m Message, r *reader) {
	w := walker{op: opDecode, r: *r}
	walk(m, &w)
	*r = w.r
}

// ---- the wire kinds ----

// str is a varString: valid UTF-8 behind a varUint length (JSON: a string).
func (w *walker) str(k string, v *string) {
	switch w.op {
	case opEncode:
		w.buf = lib0.AppendVarString(w.buf, *v)
	case opDecode:
		*v = w.r.str(k)
	case opSize:
		w.n += strSize(*v)
	case opWriteJSON:
		w.jsonStr(k, *v)
	case opReadJSON:
		*v = w.jr.str(k)
	}
}

// uint is a varUint that must be a JS safe integer (JSON: a number up to 2^53-1).
func (w *walker) uint(k string, v *uint64) {
	switch w.op {
	case opEncode:
		w.buf = lib0.AppendVarUint(w.buf, *v)
	case opDecode:
		*v = w.r.uint(k)
	case opSize:
		w.n += lib0.VarUintLen(*v)
	case opWriteJSON:
		w.jsonNum(k, *v)
	case opReadJSON:
		*v = w.jr.num(k)
	}
}

// u32 is a varUint the contract types as uint32.
func (w *walker) u32(k string, v *uint32) {
	switch w.op {
	case opEncode:
		w.buf = lib0.AppendVarUint(w.buf, uint64(*v))
	case opDecode:
		*v = w.r.u32(k)
	case opSize:
		w.n += lib0.VarUintLen(uint64(*v))
	case opWriteJSON:
		w.jsonNum(k, uint64(*v))
	case opReadJSON:
		*v = w.jr.u32(k)
	}
}

// u8 is one byte (JSON: a number up to 255).
func (w *walker) u8(k string, v *uint8) {
	switch w.op {
	case opEncode:
		w.buf = append(w.buf, *v)
	case opDecode:
		*v = w.r.u8(k)
	case opSize:
		w.n++
	case opWriteJSON:
		w.jsonNum(k, uint64(*v))
	case opReadJSON:
		*v = w.jr.u8(k)
	}
}

// boolean is one byte, 0 or 1 (JSON: a bool).
func (w *walker) boolean(k string, v *bool) {
	switch w.op {
	case opEncode:
		w.buf = appendBool(w.buf, *v)
	case opDecode:
		*v = w.r.boolean(k)
	case opSize:
		w.n++
	case opWriteJSON:
		w.jsonBool(k, *v)
	case opReadJSON:
		*v = w.jr.boolean(k)
	}
}

// caps is a capability bitset: a fixed uint32 big-endian (JSON: a number).
func (w *walker) caps(k string, v *Capability) {
	switch w.op {
	case opEncode:
		w.buf = appendU32BE(w.buf, uint32(*v))
	case opDecode:
		*v = w.r.caps(k)
	case opSize:
		w.n += 4
	case opWriteJSON:
		w.jsonNum(k, uint64(*v))
	case opReadJSON:
		*v = Capability(w.jr.u32(k))
	}
}

// nonce is a varUint8Array of exactly 16 bytes (JSON: 32 hex digits).
func (w *walker) nonce(k string, v *[16]byte) {
	switch w.op {
	case opEncode:
		w.buf = lib0.AppendVarUint8Array(w.buf, v[:])
	case opDecode:
		*v = w.r.nonce(k)
	case opSize:
		w.n += 1 + len(v)
	case opWriteJSON:
		w.jsonHex(k, v[:])
	case opReadJSON:
		*v = w.jr.nonce(k)
	}
}

// bytes is a varUint8Array; a decoded one aliases the frame (JSON: lowercase hex).
func (w *walker) bytes(k string, v *[]byte) {
	switch w.op {
	case opEncode:
		w.buf = lib0.AppendVarUint8Array(w.buf, *v)
	case opDecode:
		*v = w.r.bytes(k)
	case opSize:
		w.n += bytesSize(*v)
	case opWriteJSON:
		w.jsonHex(k, *v)
	case opReadJSON:
		*v = w.jr.hex(k)
	}
}

// namespace is a namespaceId: a varString matching ^ns-[0-9a-f]{32}$, decoded without
// allocating.
func (w *walker) namespace(k string, v *NamespaceID) {
	switch w.op {
	case opEncode:
		w.buf = v.appendTo(w.buf)
	case opDecode:
		*v = w.r.namespace(k)
	case opSize:
		w.n += namespaceLen
	case opWriteJSON:
		w.jsonNS(k, *v)
	case opReadJSON:
		*v = w.jr.ns(k)
	}
}

// versions is HELLO's list(varUint) of protocol versions: a count of at most
// MaxProtocolVersions, checked against the remaining input before the list is allocated,
// then the entries (JSON: an array of numbers).
func (w *walker) versions(k string, v *[]uint64) {
	switch w.op {
	case opEncode:
		w.buf = lib0.AppendVarUint(w.buf, uint64(len(*v)))
		for _, x := range *v {
			w.buf = lib0.AppendVarUint(w.buf, x)
		}
	case opDecode:
		*v = w.r.versions(k)
	case opSize:
		w.n += versionsSize(*v)
	case opWriteJSON:
		w.jsonNums(k, *v)
	case opReadJSON:
		*v = w.jr.nums(k)
	}
}

// chunkKind is UPDATE_CHUNK's kind, a varUint 0, 1 or 2. The kind decides the layout of
// what follows, so the decoder stops at an unknown one (JSON: a number up to 255, which the
// field rules then check).
func (w *walker) chunkKind(k string, v *ChunkKind) {
	switch w.op {
	case opEncode:
		w.buf = lib0.AppendVarUint(w.buf, uint64(*v))
	case opDecode:
		if w.r.at(k) {
			if n := w.r.ReadVarUint(); n <= uint64(KindSyncDiff) {
				*v = ChunkKind(n)
			} else if w.r.Err() == nil {
				w.r.fail("kind not 0, 1 or 2")
			}
		}
	case opSize:
		w.n += lib0.VarUintLen(uint64(*v))
	case opWriteJSON:
		w.jsonNum(k, uint64(*v))
	case opReadJSON:
		*v = ChunkKind(w.jr.u8(k))
	}
}

// optional is the presence marker of an optional field k: a byte 0 or 1 on the wire, the
// presence of key k in the frame JSON. It reports whether the field follows:
//
//	if w.optional("retryAfterMs", &m.HasRetryAfter) {
//		w.uint("retryAfterMs", &m.RetryAfterMs)
//	}
func (w *walker) optional(k string, present *bool) bool {
	switch w.op {
	case opEncode:
		w.buf = appendOptionalMarker(w.buf, *present)
	case opDecode:
		*present = w.r.optional(k)
	case opSize:
		w.n++
	case opReadJSON:
		_, ok := w.jr.fields[k]
		*present = ok && w.jr.err == nil
	}
	return *present
}

// presentWith is the presence marker of an optional field k that must be present exactly
// when the field named flag is true (flagValue); a marker that differs is a grammar
// violation.
func (w *walker) presentWith(k, flag string, flagValue bool) bool {
	switch w.op {
	case opEncode:
		w.buf = appendOptionalMarker(w.buf, flagValue)
	case opDecode:
		if w.r.optional(k) != flagValue {
			w.r.fail(k + " presence differs from " + flag)
		}
	case opSize:
		w.n++
	case opReadJSON:
		if _, ok := w.jr.fields[k]; ok != flagValue && w.jr.err == nil {
			w.jr.fail(k, "must be present exactly when %s", flag)
		}
	}
	return flagValue
}

// The encoded sizes of the variable-length kinds.

func strSize(s string) int   { return lib0.VarUintLen(uint64(len(s))) + len(s) }
func bytesSize(b []byte) int { return lib0.VarUintLen(uint64(len(b))) + len(b) }

func versionsSize(v []uint64) int {
	n := lib0.VarUintLen(uint64(len(v)))
	for _, x := range v {
		n += lib0.VarUintLen(x)
	}
	return n
}
