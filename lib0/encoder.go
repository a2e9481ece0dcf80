package lib0

import (
	"encoding/binary"
	"math"
)

// MaxSafeInteger is the largest integer a JavaScript number holds exactly (2^53−1). lib0
// integers beyond it are rejected on decode.
const MaxSafeInteger = 1<<53 - 1

// Encoder appends lib0 v1 encodings to a growing byte slice. The zero value is ready to use.
// Every writer emits the canonical (shortest) form, byte-identical to the JavaScript lib0.
type Encoder struct {
	buf []byte
}

// NewEncoder returns an encoder whose buffer starts with room for sizeHint bytes.
func NewEncoder(sizeHint int) *Encoder {
	return &Encoder{buf: make([]byte, 0, sizeHint)}
}

// Bytes returns the encoded bytes. The slice aliases the encoder's buffer: it is valid until
// the next write or Reset.
func (e *Encoder) Bytes() []byte { return e.buf }

// Len returns the number of bytes written so far.
func (e *Encoder) Len() int { return len(e.buf) }

// Reset empties the encoder, keeping its buffer for reuse.
func (e *Encoder) Reset() { e.buf = e.buf[:0] }

// AppendWith lets f append to the encoder's buffer directly and keeps what it returns: a
// writer of many values in a row appends them to a local slice, without storing the buffer
// into the encoder after each (a store the garbage collector may have to watch).
func (e *Encoder) AppendWith(f func(buf []byte) []byte) { e.buf = f(e.buf) }

// WriteUint8 writes one byte.
func (e *Encoder) WriteUint8(v uint8) { e.buf = append(e.buf, v) }

// WriteRaw writes b as is (no length prefix).
func (e *Encoder) WriteRaw(b []byte) { e.buf = append(e.buf, b...) }

// WriteBool writes a bool as the byte 0 or 1.
func (e *Encoder) WriteBool(v bool) {
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

// WriteVarUint writes an unsigned integer in 7-bit groups, least significant first, the high
// bit of each byte marking a continuation. Callers keep v ≤ MaxSafeInteger for JS peers.
func (e *Encoder) WriteVarUint(v uint64) { e.buf = AppendVarUint(e.buf, v) }

// WriteVarInt writes a signed integer: the first byte carries a continuation bit, a sign bit
// and 6 value bits; further bytes carry 7 bits each. The magnitude is encoded, not a two's
// complement.
func (e *Encoder) WriteVarInt(v int64) {
	if v < 0 {
		e.buf = appendVarIntMagnitude(e.buf, uint64(-v), true)
	} else {
		e.buf = appendVarIntMagnitude(e.buf, uint64(v), false)
	}
}

// WriteVarString writes a string as its UTF-8 byte length (varUint) followed by the bytes.
// The bytes are written as given; callers pass valid UTF-8.
func (e *Encoder) WriteVarString(s string) { e.buf = AppendVarString(e.buf, s) }

// WriteVarUint8Array writes a byte slice as its length (varUint) followed by the bytes.
func (e *Encoder) WriteVarUint8Array(b []byte) { e.buf = AppendVarUint8Array(e.buf, b) }

// WriteUint32BE writes a fixed 4-byte big-endian unsigned integer.
func (e *Encoder) WriteUint32BE(v uint32) { e.buf = binary.BigEndian.AppendUint32(e.buf, v) }

// WriteFloat32 writes an IEEE 754 single in big-endian order. NaN is written as the
// canonical quiet NaN JavaScript engines write (7fc00000).
func (e *Encoder) WriteFloat32(f float32) {
	bits := math.Float32bits(f)
	if f != f {
		bits = 0x7fc00000
	}
	e.buf = binary.BigEndian.AppendUint32(e.buf, bits)
}

// WriteFloat64 writes an IEEE 754 double in big-endian order. NaN is written as the canonical
// quiet NaN JavaScript engines write (7ff8000000000000).
func (e *Encoder) WriteFloat64(f float64) {
	bits := math.Float64bits(f)
	if f != f {
		bits = 0x7ff8000000000000
	}
	e.buf = binary.BigEndian.AppendUint64(e.buf, bits)
}

// WriteBigInt64 writes a signed 64-bit integer in big-endian two's complement (a JS bigint).
func (e *Encoder) WriteBigInt64(v int64) {
	e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v))
}

// AppendVarUint appends the varUint encoding of v to dst.
func AppendVarUint(dst []byte, v uint64) []byte {
	if v <= 0x7f {
		return append(dst, byte(v))
	}
	return appendVarUintLong(dst, v)
}

func appendVarUintLong(dst []byte, v uint64) []byte {
	n := len(dst)
	if cap(dst)-n < 10 {
		dst = append(dst, make([]byte, 10)...)
	}
	dst = dst[:n+10]
	for v > 0x7f {
		dst[n] = byte(v) | 0x80
		v >>= 7
		n++
	}
	dst[n] = byte(v)
	return dst[:n+1]
}

// VarUintLen is the number of bytes AppendVarUint writes for v.
func VarUintLen(v uint64) int {
	n := 1
	for v > 0x7f {
		v >>= 7
		n++
	}
	return n
}

// AppendVarString appends the varString encoding of s to dst.
func AppendVarString(dst []byte, s string) []byte {
	dst = AppendVarUint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendVarUint8Array appends the varUint8Array encoding of b to dst.
func AppendVarUint8Array(dst, b []byte) []byte {
	dst = AppendVarUint(dst, uint64(len(b)))
	return append(dst, b...)
}

// appendVarIntMagnitude appends a varInt given its magnitude and sign. A negative zero (the
// JS value -0) is the single byte 0x40.
func appendVarIntMagnitude(dst []byte, mag uint64, negative bool) []byte {
	first := byte(mag & 0x3f)
	if negative {
		first |= 0x40
	}
	if mag > 0x3f {
		first |= 0x80
	}
	dst = append(dst, first)
	mag >>= 6
	for mag > 0 {
		b := byte(mag & 0x7f)
		if mag > 0x7f {
			b |= 0x80
		}
		dst = append(dst, b)
		mag >>= 7
	}
	return dst
}
