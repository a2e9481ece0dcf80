package lib0

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// Decoder reads lib0 v1 encodings strictly from a byte slice: shortest-form integers only,
// integers within the JS safe range, valid UTF-8, bool and optional bytes 0 or 1, and every
// declared length checked against the remaining input before anything is sliced or allocated.
//
// Errors are sticky: after the first failure every read returns a zero value without
// advancing, and Err returns that first failure (an *Error). Callers read a whole structure and
// check Err once. Slices returned by ReadRaw, ReadVarUint8Array and ReadVarStringBytes alias
// the input; they are valid as long as the input is.
type Decoder struct {
	buf []byte
	pos int
	err error
}

// NewDecoder returns a decoder reading b from its start.
func NewDecoder(b []byte) *Decoder { return &Decoder{buf: b} }

// Reset makes d read b from its start and clears any error.
func (d *Decoder) Reset(b []byte) { *d = Decoder{buf: b} }

// Err returns the first failure, or nil.
func (d *Decoder) Err() error { return d.err }

// Fail records err (if no failure is recorded yet) at the current offset, wrapped in an
// *Error. Callers use it for their own grammar rules so one error path covers both.
func (d *Decoder) Fail(err error) { d.failAt(err, d.pos) }

func (d *Decoder) failAt(kind error, offset int) {
	if d.err == nil {
		d.err = &Error{Kind: kind, Offset: offset}
	}
}

// Pos returns the offset of the next byte to read.
func (d *Decoder) Pos() int { return d.pos }

// Remaining returns the number of unread bytes (0 after a failure).
func (d *Decoder) Remaining() int {
	if d.err != nil {
		return 0
	}
	return len(d.buf) - d.pos
}

// Finish returns the first failure, or ErrTrailing if unread bytes remain.
func (d *Decoder) Finish() error {
	if d.err == nil && d.pos != len(d.buf) {
		d.failAt(ErrTrailing, d.pos)
	}
	return d.err
}

// ReadUint8 reads one byte.
func (d *Decoder) ReadUint8() uint8 {
	if d.err != nil {
		return 0
	}
	if d.pos >= len(d.buf) {
		d.failAt(ErrTruncated, d.pos)
		return 0
	}
	b := d.buf[d.pos]
	d.pos++
	return b
}

// ReadRaw reads the next n bytes, aliasing the input.
func (d *Decoder) ReadRaw(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.buf)-d.pos {
		d.failAt(ErrTruncated, d.pos)
		return nil
	}
	b := d.buf[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	return b
}

// ReadBool reads a bool byte, which must be 0 or 1.
func (d *Decoder) ReadBool() bool {
	start := d.pos
	switch d.ReadUint8() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.failAt(ErrBool, start)
		return false
	}
}

// ReadOptional reads an optional marker byte (0 = absent, 1 = present).
func (d *Decoder) ReadOptional() bool {
	start := d.pos
	switch d.ReadUint8() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.failAt(ErrOptional, start)
		return false
	}
}

// ReadVarUint reads a shortest-form varUint no larger than MaxSafeInteger.
func (d *Decoder) ReadVarUint() uint64 {
	if d.err == nil && d.pos < len(d.buf) {
		if b := d.buf[d.pos]; b < 0x80 {
			d.pos++
			return uint64(b)
		}
	}
	return d.readVarUintLong()
}

func (d *Decoder) readVarUintLong() uint64 {
	if d.err == nil {
		if v, ok := d.readVarUintShort(); ok {
			return v
		}
	}
	return d.readVarUint(MaxSafeInteger)
}

// readVarUintShort reads a varUint of two to seven bytes (below 2^49, so within every
// limit) followed by at least one more byte of input; it reports false, reading nothing,
// for anything else (readVarUint then reads it or fails as it should).
func (d *Decoder) readVarUintShort() (uint64, bool) {
	p := d.pos
	if len(d.buf)-p < 8 {
		return 0, false
	}
	b := d.buf[p : p+8 : p+8]
	v := uint64(b[0] & 0x7f)
	for i := 1; i < 7; i++ {
		c := b[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if c == 0 {
				return 0, false // not the shortest form
			}
			d.pos = p + i + 1
			return v, true
		}
	}
	return 0, false
}

// ReadVarUint32 reads a shortest-form varUint no larger than 2^32−1.
func (d *Decoder) ReadVarUint32() uint32 {
	if d.err == nil && d.pos < len(d.buf) {
		if b := d.buf[d.pos]; b < 0x80 {
			d.pos++
			return uint32(b)
		}
	}
	return uint32(d.readVarUint(math.MaxUint32))
}

// ReadVarUintMax reads a shortest-form varUint no larger than max (and MaxSafeInteger).
func (d *Decoder) ReadVarUintMax(max uint64) uint64 {
	return d.readVarUint(min(max, MaxSafeInteger))
}

func (d *Decoder) readVarUint(max uint64) uint64 {
	if d.err != nil {
		return 0
	}
	start := d.pos
	var v uint64
	for i, shift := start, uint(0); i < len(d.buf); i, shift = i+1, shift+7 {
		if shift > 49 { // an eighth continuation byte: beyond 56 bits, surely out of range
			d.failAt(ErrOverflow, start)
			return 0
		}
		b := d.buf[i]
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			if b == 0 && i > start {
				d.failAt(ErrNonCanonical, start)
				return 0
			}
			if v > max {
				d.failAt(ErrOverflow, start)
				return 0
			}
			d.pos = i + 1
			return v
		}
	}
	d.failAt(ErrTruncated, start)
	return 0
}

// ReadVarInt reads a shortest-form varInt whose magnitude is at most MaxSafeInteger. The JS
// value -0 reads as 0; ReadVarIntSign tells it apart, and ReadAny keeps it as a negative-zero
// float64.
func (d *Decoder) ReadVarInt() int64 {
	mag, neg := d.ReadVarIntSign()
	if neg {
		return -int64(mag)
	}
	return int64(mag)
}

// ReadVarIntSign reads a varInt as ReadVarInt does, returning its magnitude and sign bit
// apart, so that -0 reads as (0, true): lib0's UintOptRle columns (update format v2) mark a
// run by a negative value, -0 included.
func (d *Decoder) ReadVarIntSign() (mag uint64, negative bool) {
	if d.err != nil {
		return 0, false
	}
	start := d.pos
	if start >= len(d.buf) {
		d.failAt(ErrTruncated, start)
		return 0, false
	}
	first := d.buf[start]
	mag = uint64(first & 0x3f)
	negative = first&0x40 != 0
	if first < 0x80 {
		d.pos = start + 1
		return mag, negative
	}
	for i, shift := start+1, uint(6); i < len(d.buf); i, shift = i+1, shift+7 {
		if shift > 48 {
			d.failAt(ErrOverflow, start)
			return 0, false
		}
		b := d.buf[i]
		mag |= uint64(b&0x7f) << shift
		if b < 0x80 {
			if b == 0 {
				d.failAt(ErrNonCanonical, start)
				return 0, false
			}
			if mag > MaxSafeInteger {
				d.failAt(ErrOverflow, start)
				return 0, false
			}
			d.pos = i + 1
			return mag, negative
		}
	}
	d.failAt(ErrTruncated, start)
	return 0, false
}

// ReadVarUint8Array reads a length-prefixed byte slice, aliasing the input. The length is
// checked against the remaining input before slicing: nothing is allocated.
func (d *Decoder) ReadVarUint8Array() []byte {
	start := d.pos
	n := d.ReadVarUint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)-d.pos) {
		d.failAt(ErrLength, start)
		return nil
	}
	b := d.buf[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	return b
}

// ReadVarStringBytes reads a varString and returns its UTF-8 bytes, aliasing the input. The
// bytes are validated as UTF-8.
func (d *Decoder) ReadVarStringBytes() []byte {
	start := d.pos
	b := d.ReadVarUint8Array()
	if d.err != nil {
		return nil
	}
	if !isValidUTF8(b) {
		d.failAt(ErrInvalidUTF8, start)
		return nil
	}
	return b
}

// ReadVarString reads a varString (valid UTF-8) into a Go string.
func (d *Decoder) ReadVarString() string {
	b := d.ReadVarStringBytes()
	if len(b) == 0 {
		return ""
	}
	return string(b)
}

func isValidUTF8(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return utf8.Valid(b)
		}
	}
	return true
}

// ReadUint32BE reads a fixed 4-byte big-endian unsigned integer.
func (d *Decoder) ReadUint32BE() uint32 {
	b := d.ReadRaw(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

// ReadFloat32 reads a big-endian IEEE 754 single.
func (d *Decoder) ReadFloat32() float32 {
	b := d.ReadRaw(4)
	if b == nil {
		return 0
	}
	return math.Float32frombits(binary.BigEndian.Uint32(b))
}

// ReadFloat64 reads a big-endian IEEE 754 double.
func (d *Decoder) ReadFloat64() float64 {
	b := d.ReadRaw(8)
	if b == nil {
		return 0
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b))
}

// ReadBigInt64 reads a big-endian two's-complement 64-bit integer (a JS bigint).
func (d *Decoder) ReadBigInt64() int64 {
	b := d.ReadRaw(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// ReadCount reads a list count (varUint) and checks it against max and against the remaining
// input, assuming each item takes at least minItemBytes bytes. It returns 0 on failure, so a
// caller may size a slice by the result.
func (d *Decoder) ReadCount(max int, minItemBytes int) int {
	start := d.pos
	n := d.ReadVarUint()
	if d.err != nil {
		return 0
	}
	if n > uint64(max) {
		d.failAt(ErrCount, start)
		return 0
	}
	if minItemBytes > 0 && n > uint64((len(d.buf)-d.pos)/minItemBytes) {
		d.failAt(ErrLength, start)
		return 0
	}
	return int(n)
}
