package yjs

import (
	"errors"
	"math"
	"unicode/utf8"

	"github.com/nomicore/nomicore/lib0"
)

// Update format v2 (JS UpdateEncoderV2 / UpdateDecoderV2 and DSEncoderV2, yjs 13.6) holds the
// same structs and delete set as v1, with the fields that repeat moved into columns:
//
//	updateV2 = varUint(feature flag, 0) column×9 rest
//	column   = varUint8Array, in this order:
//	           keyClock   IntDiffOptRle: index into the key table (format keys, XML node names)
//	           client     UintOptRle: client of every block, origin, right origin and parent ID
//	           leftClock  IntDiffOptRle: clock of origins and parent IDs
//	           rightClock IntDiffOptRle: clock of right origins
//	           info       Rle of uint8: info bytes
//	           string     varString(all strings joined) then UintOptRle of their UTF-16 lengths
//	           parentInfo Rle of uint8: 1 root key, 0 parent ID
//	           typeRef    UintOptRle: type refs of ContentType
//	           len        UintOptRle: GC lengths, ContentDeleted lengths, JSON and Any counts
//	rest     = varUint(#blocks) { varUint(#structs) client← varUint(clock) struct… } deleteSet
//	           with Skip lengths, Binary (varUint8Array), Any, Embed and Format values and
//	           subdocument options (lib0 any) in the rest too;
//	           deleteSet as v1, but each range's clock is the gap after the previous range of
//	           its client and its length is written minus one.
//
// A key read with the next free index takes the next string and joins the table; a lower
// index repeats a key. Run-length columns: Rle writes a value and, when another value
// follows, the run length minus one; UintOptRle writes a value as a positive varInt, or a run
// as the negated value (−0 for zero) followed by varUint(run length − 2); IntDiffOptRle
// writes varInt(2·diff + hasRun) then varUint(run length − 2) when hasRun, each read adding
// diff to the previous value.

// Grammar violations of update format v2, wrapped in a *DecodeError.
var (
	ErrV2Feature   = errors.New("update v2 feature flag is not 0")
	ErrV2Key       = errors.New("update v2 key index is beyond the key table")
	ErrV2Surrogate = errors.New("update v2 string length ends inside a surrogate pair")
	ErrV2Expansion = errors.New("update v2 would be over 64 times its size (+64 KiB) as v1")
)

// ConvertUpdateV2ToV1 decodes an update in format v2 (JS encodeStateAsUpdateV2, the
// 'updateV2' event) and returns the equivalent v1 update — the bytes JS
// convertUpdateFormatV2ToV1 returns. Decoding is strict and bounded as for v1, and stricter
// than JS in the same places, and also refuses a non-zero feature flag, a key index that
// skips an entry of the key table, a string length that ends inside a surrogate pair,
// unconsumed column bytes or runs, Embed and Format values JSON cannot carry (JS throws),
// and an update whose v1 form would exceed 64 times its size plus 64 KiB. Embed and Format
// values become JSON in v1, as in JS's conversion (a Uint8Array becomes an object). Every
// failure is a *DecodeError.
func ConvertUpdateV2ToV1(update []byte) ([]byte, error) {
	r := newV2Reader(update)
	if err := r.error(); err != nil {
		return nil, err
	}
	limit := 64*len(update) + 1<<16
	body := lib0.NewEncoder(2 * len(update))
	rest := r.rest
	blocks := rest.ReadCount(math.MaxInt32, 2)
	written := 0
	seen := make(map[uint64]struct{})
	var s rawStruct
	for i := 0; i < blocks && r.error() == nil; i++ {
		n := rest.ReadCount(math.MaxInt32, 0) // structs may take no rest bytes: limit bounds them
		client := r.client.read()
		clock := rest.ReadVarUint()
		if r.error() != nil {
			break
		}
		if _, dup := seen[client]; dup {
			rest.Fail(ErrDuplicateClient)
			break
		}
		seen[client] = struct{}{}
		if n > 0 { // JS writes no empty block
			body.WriteVarUint(uint64(n))
			body.WriteVarUint(client)
			body.WriteVarUint(clock)
			written++
		}
		for j := 0; j < n; j++ {
			if !r.readStruct(&s, ID{client, clock}) {
				break
			}
			s.write(body, 0)
			clock += s.length
			if body.Len() > limit {
				rest.Fail(ErrV2Expansion)
				break
			}
		}
	}
	ds := r.readDeleteSet()
	if err := r.finish(); err != nil {
		return nil, err
	}
	out := lib0.NewEncoder(lib0.VarUintLen(uint64(written)) + body.Len() + 16)
	out.WriteVarUint(uint64(written))
	out.WriteRaw(body.Bytes())
	ds.write(out)
	return out.Bytes(), nil
}

// ApplyUpdateV2 integrates an update in format v2 into doc: ConvertUpdateV2ToV1, then
// ApplyUpdate, so a malformed update returns a *DecodeError and changes nothing. Embed and
// Format values arrive as their JSON (JS applyUpdateV2 would keep a Uint8Array, NaN or -0
// in them as such).
func ApplyUpdateV2(doc *Doc, update []byte, origin any) error {
	v1, err := ConvertUpdateV2ToV1(update)
	if err != nil {
		return err
	}
	return ApplyUpdate(doc, v1, origin)
}

// v2Reader reads the columns and the rest of a v2 update. Every part keeps its first error
// (sticky in its lib0.Decoder); error reports the first found.
type v2Reader struct {
	rest                            *lib0.Decoder // the whole update; past the columns, the rest
	keyClock, leftClock, rightClock intDiffColumn
	client, typeRef, length         uintColumn
	info, parentInfo                byteColumn
	str                             stringColumn
	keys                            []string
}

func newV2Reader(update []byte) *v2Reader {
	d := lib0.NewDecoder(update)
	r := &v2Reader{rest: d}
	if d.ReadVarUint() != 0 && d.Err() == nil {
		d.Fail(ErrV2Feature)
	}
	next := func() column {
		b := d.ReadVarUint8Array()
		return column{d: lib0.NewDecoder(b), base: d.Pos() - len(b)}
	}
	r.keyClock.column = next()
	r.client.column = next()
	r.leftClock.column = next()
	r.rightClock.column = next()
	r.info.column = next()
	r.str.lens.column = next()
	r.parentInfo.column = next()
	r.typeRef.column = next()
	r.length.column = next()
	r.str.s = r.str.lens.d.ReadVarStringBytes()
	return r
}

// error returns the first error of any part as a *DecodeError with its offset in the update.
func (r *v2Reader) error() error {
	if err := r.rest.Err(); err != nil {
		return decodeErr("update v2", err)
	}
	for _, c := range r.columns() {
		if err := c.d.Err(); err != nil {
			de := decodeErr("update v2", err).(*DecodeError)
			de.Offset += c.base
			return de
		}
	}
	return nil
}

func (r *v2Reader) columns() [9]*column {
	return [9]*column{&r.keyClock.column, &r.client.column, &r.leftClock.column,
		&r.rightClock.column, &r.info.column, &r.str.lens.column, &r.parentInfo.column,
		&r.typeRef.column, &r.length.column}
}

// finish checks that the rest and every column were read to their end, runs included.
func (r *v2Reader) finish() error {
	if err := r.error(); err != nil {
		return err
	}
	if err := r.rest.Finish(); err != nil {
		return decodeErr("update v2", err)
	}
	if r.str.pos != len(r.str.s) {
		r.str.lens.d.Fail(lib0.ErrTrailing)
	}
	for _, c := range r.columns() {
		if c.d.Remaining() > 0 || c.pending {
			c.d.Fail(lib0.ErrTrailing)
		}
	}
	return r.error()
}

// readStruct reads the struct with the given id into s, checking the rules of the v1
// reader (structReader.next). It returns false on an error (see error).
func (r *v2Reader) readStruct(s *rawStruct, id ID) bool {
	*s = rawStruct{id: id}
	info := r.info.read()
	if r.error() != nil {
		return false
	}
	ref := info & 0x1f
	switch {
	case ref == refGC || ref == refSkip:
		if info != ref {
			r.rest.Fail(ErrContentRef)
			return false
		}
		if ref == refGC {
			s.kind = structGC
			s.length = r.length.read()
		} else {
			s.kind = structSkip
			s.length = r.rest.ReadVarUint()
		}
	case ref <= refDoc:
		s.kind = structItem
		if info&0x80 != 0 {
			s.hasOrigin = true
			s.origin = r.leftID()
		}
		if info&0x40 != 0 {
			s.hasRight = true
			s.rightOrigin = ID{r.client.read(), r.rightClock.clock()}
		}
		if !s.hasOrigin && !s.hasRight {
			switch r.parentInfo.read() {
			case 1:
				s.parent = parentRoot
				s.parentKey = string(r.str.readBytes())
			case 0:
				s.parent = parentItem
				s.parentID = r.leftID()
			default:
				if r.error() == nil {
					r.rest.Fail(ErrParentInfo)
				}
				return false
			}
			if info&0x20 != 0 {
				s.hasSub = true
				s.sub = string(r.str.readBytes())
			}
		}
		s.content = r.readContent(ref)
		s.length = s.content.len()
	default:
		r.rest.Fail(ErrContentRef)
		return false
	}
	if r.error() != nil {
		return false
	}
	if err := s.invalid(); err != nil {
		r.rest.Fail(err)
		return false
	}
	return true
}

// leftID reads an origin or parent ID: a client and a leftClock.
func (r *v2Reader) leftID() ID {
	client := r.client.read()
	return ID{client, r.leftClock.clock()}
}

// readKey reads a format key or XML node name through the key table.
func (r *v2Reader) readKey() string {
	k := r.keyClock.read()
	switch {
	case r.keyClock.d.Err() != nil:
		return ""
	case k >= 0 && k < int64(len(r.keys)):
		return r.keys[k]
	case k == int64(len(r.keys)):
		key := string(r.str.readBytes())
		r.keys = append(r.keys, key)
		return key
	}
	r.keyClock.d.Fail(ErrV2Key)
	return ""
}

// readContent reads the content of an Item (JS readItemContent with an UpdateDecoderV2).
func (r *v2Reader) readContent(ref uint8) content {
	rest := r.rest
	switch ref {
	case refDeleted:
		return &contentDeleted{n: r.length.read()}
	case refJSON:
		n := r.length.read()
		// every value takes at least one byte of the string column
		vals := make([]any, 0, min(n, uint64(len(r.str.s)-r.str.pos)))
		for i := uint64(0); i < n && r.error() == nil; i++ {
			s := string(r.str.readBytes())
			if r.error() != nil {
				break
			}
			v, err := parseJSONElement(s)
			if err != nil {
				rest.Fail(err)
				break
			}
			vals = append(vals, v)
		}
		return &contentJSON{vals: vals}
	case refBinary:
		return &contentBinary{b: rest.ReadVarUint8Array()}
	case refString:
		b, units := r.str.read()
		return &contentString{b: b[:len(b):len(b)], u16: units}
	case refEmbed:
		return &contentEmbed{v: r.readJSONAny()}
	case refFormat:
		key := r.readKey()
		return &contentFormat{key: key, val: r.readJSONAny()}
	case refType:
		kind, ok := kindOfRef(r.typeRef.read())
		if r.error() == nil && !ok {
			rest.Fail(ErrTypeRef)
		}
		t := newType(kind)
		if kind == KindXmlElement || kind == KindXmlHook {
			t.nodeName = r.readKey()
		}
		return &contentType{t: t}
	case refAny:
		n := r.length.read()
		// every value takes at least one byte of the rest
		vals := make([]any, 0, min(n, uint64(rest.Remaining())))
		for i := uint64(0); i < n && r.error() == nil; i++ {
			vals = append(vals, rest.ReadAny())
		}
		return &contentAny{vals: vals}
	case refDoc:
		guid := string(r.str.readBytes())
		opts := rest.ReadAny()
		if r.error() != nil {
			return &contentDoc{doc: &Doc{}}
		}
		sub, err := subdocFromOptions(guid, opts)
		if err != nil {
			rest.Fail(err)
			return &contentDoc{doc: &Doc{}}
		}
		return &contentDoc{doc: sub}
	}
	panic("yjs: unreachable content ref")
}

// readJSONAny reads an Embed or Format value: lib0 any in v2, JSON in v1. Values
// JSON.stringify rejects (undefined at the top, bigint) are refused.
func (r *v2Reader) readJSONAny() any {
	v := r.rest.ReadAny()
	if r.rest.Err() == nil && !jsonable(v) {
		r.rest.Fail(ErrJSON)
	}
	return v
}

// readDeleteSet reads the v2 delete set (JS readDeleteSet with a DSDecoderV2) into the form
// JS writes as v1: clients with no ranges dropped, a repeated client's ranges appended.
func (r *v2Reader) readDeleteSet() deleteSet {
	var ds deleteSet
	d := r.rest
	n := d.ReadCount(math.MaxInt32, 2)
	for i := 0; i < n && r.error() == nil; i++ {
		client := d.ReadVarUint()
		m := d.ReadCount(math.MaxInt32, 2)
		var next uint64 // the end of the previous range
		for j := 0; j < m && r.error() == nil; j++ {
			gap := d.ReadVarUint()
			length := d.ReadVarUint() + 1
			if d.Err() != nil {
				break
			}
			clock := next + gap
			if clock+length > maxClock {
				d.Fail(ErrClockRange)
				break
			}
			ds.add(client, clock, length)
			next = clock + length
		}
	}
	return ds
}

// column is one column of a v2 update: its own decoder, and its offset in the update.
type column struct {
	d       *lib0.Decoder
	base    int
	pending bool // a run is not used up
}

// uintColumn reads a lib0 UintOptRle column.
type uintColumn struct {
	column
	val, count uint64
}

func (c *uintColumn) read() uint64 {
	if c.count == 0 {
		v, negative := c.d.ReadVarIntSign() // −0 starts a run of zeros
		if c.d.Err() != nil {
			return 0
		}
		c.count = 1
		if negative {
			c.count = c.d.ReadVarUint() + 2
			if c.d.Err() != nil {
				c.count = 0
				return 0
			}
		}
		c.val = v
	}
	c.count--
	c.pending = c.count > 0
	return c.val
}

// intDiffColumn reads a lib0 IntDiffOptRle column.
type intDiffColumn struct {
	column
	val, diff int64
	count     uint64
}

func (c *intDiffColumn) read() int64 {
	if c.count == 0 {
		v := c.d.ReadVarInt()
		if c.d.Err() != nil {
			return 0
		}
		c.diff = v >> 1
		c.count = 1
		if v&1 != 0 {
			c.count = c.d.ReadVarUint() + 2
			if c.d.Err() != nil {
				c.count = 0
				return 0
			}
		}
	}
	c.val += c.diff
	c.count--
	c.pending = c.count > 0
	return c.val
}

// clock reads a clock: within 0…2^53−1.
func (c *intDiffColumn) clock() uint64 {
	v := c.read()
	if c.d.Err() == nil && (v < 0 || v > maxClock) {
		c.d.Fail(ErrClockRange)
		return 0
	}
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// byteColumn reads a lib0 Rle column of uint8: the last run has no length and lasts forever.
type byteColumn struct {
	column
	val     uint8
	count   uint64
	forever bool
}

func (c *byteColumn) read() uint8 {
	if c.count == 0 && !c.forever {
		c.val = c.d.ReadUint8()
		if c.d.Err() != nil {
			return 0
		}
		if c.d.Remaining() > 0 {
			c.count = c.d.ReadVarUint() + 1
			if c.d.Err() != nil {
				c.count = 0
				return 0
			}
		} else {
			c.forever = true
		}
	}
	if !c.forever {
		c.count--
		c.pending = c.count > 0
	}
	return c.val
}

// stringColumn reads the string column: the joined strings, cut by their UTF-16 lengths.
type stringColumn struct {
	s    []byte // valid UTF-8
	pos  int
	lens uintColumn // over the whole column: s is read from it first
}

// read returns the next string (aliasing the input) and its UTF-16 length.
func (c *stringColumn) read() ([]byte, uint64) {
	n := c.lens.read()
	if c.lens.d.Err() != nil {
		return nil, 0
	}
	i, units := c.pos, uint64(0)
	for units < n {
		if i >= len(c.s) {
			c.lens.d.Fail(lib0.ErrTruncated)
			return nil, 0
		}
		if c.s[i] < utf8.RuneSelf {
			i++
			units++
			continue
		}
		_, size := utf8.DecodeRune(c.s[i:])
		if size == 4 {
			if units+1 == n {
				c.lens.d.Fail(ErrV2Surrogate)
				return nil, 0
			}
			units += 2
		} else {
			units++
		}
		i += size
	}
	b := c.s[c.pos:i]
	c.pos = i
	return b, n
}

func (c *stringColumn) readBytes() []byte {
	b, _ := c.read()
	return b
}
