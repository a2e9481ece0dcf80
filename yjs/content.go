package yjs

import (
	"unicode/utf8"

	"github.com/nomicore/nomicore/lib0"
)

// Content refs: the low five bits of an Item's info byte (0 is a GC struct, 10 a Skip).
const (
	refGC      = 0
	refDeleted = 1
	refJSON    = 2
	refBinary  = 3
	refString  = 4
	refEmbed   = 5
	refFormat  = 6
	refType    = 7
	refAny     = 8
	refDoc     = 9
	refSkip    = 10
)

// content is what an Item holds. Lengths count clock units: one per element, one per UTF-16
// code unit of a string.
type content interface {
	ref() uint8
	len() uint64
	// countable reports whether the content counts in a sequence's length and indexes.
	countable() bool
	// splice keeps [0, offset) and returns the rest. Only contents longer than 1 split.
	splice(offset uint64) content
	// merge appends right (of the same concrete type) and reports whether it could.
	merge(right content) bool
	// write encodes the content from offset on.
	write(e *lib0.Encoder, offset uint64)
	// appendValues appends the visible values (JS getContent) to dst.
	appendValues(dst []any) []any
}

// contentDeleted stands for n units of content that were deleted and garbage-collected.
type contentDeleted struct{ n uint64 }

func (c *contentDeleted) ref() uint8      { return refDeleted }
func (c *contentDeleted) len() uint64     { return c.n }
func (c *contentDeleted) countable() bool { return false }
func (c *contentDeleted) splice(offset uint64) content {
	right := &contentDeleted{n: c.n - offset}
	c.n = offset
	return right
}
func (c *contentDeleted) merge(right content) bool {
	c.n += right.(*contentDeleted).n
	return true
}
func (c *contentDeleted) write(e *lib0.Encoder, offset uint64) { e.WriteVarUint(c.n - offset) }
func (c *contentDeleted) appendValues(dst []any) []any         { return dst }

// contentJSON is the legacy JSON content: values as JSON.parse returns them ("undefined"
// encodes undefined).
type contentJSON struct{ vals []any }

func (c *contentJSON) ref() uint8      { return refJSON }
func (c *contentJSON) len() uint64     { return uint64(len(c.vals)) }
func (c *contentJSON) countable() bool { return true }
func (c *contentJSON) splice(offset uint64) content {
	right := &contentJSON{vals: c.vals[offset:]}
	c.vals = c.vals[:offset:offset]
	return right
}
func (c *contentJSON) merge(right content) bool {
	c.vals = append(c.vals, right.(*contentJSON).vals...)
	return true
}
func (c *contentJSON) write(e *lib0.Encoder, offset uint64) {
	e.WriteVarUint(uint64(len(c.vals)) - offset)
	for _, v := range c.vals[offset:] {
		if _, undef := v.(lib0.Undefined); undef {
			e.WriteVarString("undefined")
		} else {
			e.WriteVarString(jsonStringify(v))
		}
	}
}
func (c *contentJSON) appendValues(dst []any) []any { return append(dst, c.vals...) }

// contentBinary is one Uint8Array value.
type contentBinary struct{ b []byte }

func (c *contentBinary) ref() uint8                           { return refBinary }
func (c *contentBinary) len() uint64                          { return 1 }
func (c *contentBinary) countable() bool                      { return true }
func (c *contentBinary) splice(uint64) content                { panic("yjs: binary content cannot split") }
func (c *contentBinary) merge(content) bool                   { return false }
func (c *contentBinary) write(e *lib0.Encoder, offset uint64) { e.WriteVarUint8Array(c.b) }
func (c *contentBinary) appendValues(dst []any) []any         { return append(dst, c.b) }

// contentString is text. b holds UTF-8; u16 is the JS length (UTF-16 code units). Splitting
// inside a surrogate pair leaves U+FFFD on both sides, as JS yjs does. The capacity of b
// beyond its length belongs to this content only (splits cap the left part), so merging
// appends in place.
type contentString struct {
	b   []byte
	u16 uint64
}

func newContentString(s string) *contentString {
	return &contentString{b: []byte(s), u16: utf16Len(s)}
}

func (c *contentString) ref() uint8      { return refString }
func (c *contentString) len() uint64     { return c.u16 }
func (c *contentString) countable() bool { return true }
func (c *contentString) ascii() bool     { return uint64(len(c.b)) == c.u16 }

func (c *contentString) splice(offset uint64) content {
	right := &contentString{}
	c.spliceInto(right, offset)
	return right
}

// spliceInto is splice with the right part written to right.
func (c *contentString) spliceInto(right *contentString, offset uint64) {
	if c.ascii() {
		*right = contentString{b: c.b[offset:], u16: c.u16 - offset}
		c.b = c.b[:offset:offset]
		c.u16 = offset
		return
	}
	at, inPair := utf16Offset(c.b, offset)
	*right = contentString{u16: c.u16 - offset}
	if inPair {
		// The split falls between the two halves of a surrogate pair: each side keeps one
		// unit, replaced by U+FFFD.
		right.b = append([]byte("\uFFFD"), c.b[at+4:]...)
		left := make([]byte, at, at+3)
		copy(left, c.b[:at])
		c.b = append(left, "\uFFFD"...)
		c.b = c.b[:len(c.b):len(c.b)]
	} else {
		right.b = c.b[at:]
		c.b = c.b[:at:at]
	}
	c.u16 = offset
}

func (c *contentString) merge(right content) bool {
	r := right.(*contentString)
	c.b = append(c.b, r.b...)
	c.u16 += r.u16
	return true
}

func (c *contentString) write(e *lib0.Encoder, offset uint64) {
	e.WriteVarUint8Array(c.tail(offset))
}

// tail returns the UTF-8 of the units from offset on (U+FFFD for a lone low surrogate).
func (c *contentString) tail(offset uint64) []byte {
	if offset == 0 {
		return c.b
	}
	if c.ascii() {
		return c.b[offset:]
	}
	at, inPair := utf16Offset(c.b, offset)
	if inPair {
		return append([]byte("\uFFFD"), c.b[at+4:]...)
	}
	return c.b[at:]
}

func (c *contentString) appendValues(dst []any) []any {
	// JS str.split(''): one string per UTF-16 code unit; halves of a pair become U+FFFD.
	for s := c.b; len(s) > 0; {
		r, n := utf8.DecodeRune(s)
		if r >= 0x10000 {
			dst = append(dst, "\uFFFD", "\uFFFD")
		} else {
			dst = append(dst, string(s[:n]))
		}
		s = s[n:]
	}
	return dst
}

// contentEmbed is a text embed: one JSON value.
type contentEmbed struct{ v any }

func (c *contentEmbed) ref() uint8                           { return refEmbed }
func (c *contentEmbed) len() uint64                          { return 1 }
func (c *contentEmbed) countable() bool                      { return true }
func (c *contentEmbed) splice(uint64) content                { panic("yjs: embed content cannot split") }
func (c *contentEmbed) merge(content) bool                   { return false }
func (c *contentEmbed) write(e *lib0.Encoder, offset uint64) { e.WriteVarString(jsonStringify(c.v)) }
func (c *contentEmbed) appendValues(dst []any) []any         { return append(dst, c.v) }

// contentFormat is a formatting mark in a text: from here on, attribute key has value val
// (null removes it).
type contentFormat struct {
	key string
	val any
}

func (c *contentFormat) ref() uint8            { return refFormat }
func (c *contentFormat) len() uint64           { return 1 }
func (c *contentFormat) countable() bool       { return false }
func (c *contentFormat) splice(uint64) content { panic("yjs: format content cannot split") }
func (c *contentFormat) merge(content) bool    { return false }
func (c *contentFormat) write(e *lib0.Encoder, offset uint64) {
	e.WriteVarString(c.key)
	e.WriteVarString(jsonStringify(c.val))
}
func (c *contentFormat) appendValues(dst []any) []any { return dst }

// contentType holds a nested shared type.
type contentType struct{ t *Type }

func (c *contentType) ref() uint8            { return refType }
func (c *contentType) len() uint64           { return 1 }
func (c *contentType) countable() bool       { return true }
func (c *contentType) splice(uint64) content { panic("yjs: type content cannot split") }
func (c *contentType) merge(content) bool    { return false }
func (c *contentType) write(e *lib0.Encoder, offset uint64) {
	e.WriteVarUint(uint64(c.t.kind.typeRef()))
	if c.t.kind == KindXmlElement || c.t.kind == KindXmlHook {
		e.WriteVarString(c.t.nodeName)
	}
}
func (c *contentType) appendValues(dst []any) []any { return append(dst, c.t.value()) }

// contentAny holds values of the lib0 any model.
type contentAny struct{ vals []any }

func (c *contentAny) ref() uint8      { return refAny }
func (c *contentAny) len() uint64     { return uint64(len(c.vals)) }
func (c *contentAny) countable() bool { return true }
func (c *contentAny) splice(offset uint64) content {
	right := &contentAny{vals: c.vals[offset:]}
	c.vals = c.vals[:offset:offset]
	return right
}
func (c *contentAny) merge(right content) bool {
	c.vals = append(c.vals, right.(*contentAny).vals...)
	return true
}
func (c *contentAny) write(e *lib0.Encoder, offset uint64) {
	e.WriteVarUint(uint64(len(c.vals)) - offset)
	for _, v := range c.vals[offset:] {
		_ = e.WriteAny(v) // values are of the lib0 model: always encodable
	}
}
func (c *contentAny) appendValues(dst []any) []any { return append(dst, c.vals...) }

// contentDoc holds a subdocument. Its options are re-derived from the subdocument as JS
// does: gc:false when gc is off, autoLoad:true, meta when set.
type contentDoc struct{ doc *Doc }

func (c *contentDoc) ref() uint8            { return refDoc }
func (c *contentDoc) len() uint64           { return 1 }
func (c *contentDoc) countable() bool       { return true }
func (c *contentDoc) splice(uint64) content { panic("yjs: doc content cannot split") }
func (c *contentDoc) merge(content) bool    { return false }
func (c *contentDoc) write(e *lib0.Encoder, offset uint64) {
	e.WriteVarString(c.doc.guid)
	_ = e.WriteAny(c.doc.subdocOptions())
}
func (c *contentDoc) appendValues(dst []any) []any { return append(dst, c.doc) }

// utf16Len is the JS length of s.
func utf16Len(s string) uint64 {
	n := uint64(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return utf16LenSlow(s[i:]) + uint64(i)
		}
	}
	return n
}

func utf16LenSlow(s string) uint64 {
	var n uint64
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

func utf16LenBytes(b []byte) uint64 {
	for i := 0; i < len(b); i++ {
		if b[i] >= utf8.RuneSelf {
			return utf16LenSlow(string(b[i:])) + uint64(i)
		}
	}
	return uint64(len(b))
}

// utf16Offset returns the byte offset in b (valid UTF-8) of UTF-16 unit offset u. When u
// falls between the halves of a surrogate pair it returns the offset of that 4-byte
// character and inPair = true.
func utf16Offset(b []byte, u uint64) (at int, inPair bool) {
	var units uint64
	for at < len(b) && units < u {
		c := b[at]
		if c < utf8.RuneSelf {
			at++
			units++
			continue
		}
		_, n := utf8.DecodeRune(b[at:])
		if n == 4 {
			if units+1 == u {
				return at, true
			}
			units += 2
		} else {
			units++
		}
		at += n
	}
	return at, false
}

// The content of an item is read and changed through the methods below.

// contentRef is the content ref of the item (refGC for a GC struct).
func (it *item) contentRef() uint8 {
	if it.isGC() {
		return refGC
	}
	return it.xcontent.ref()
}

// setContent gives a new item its content c (which it keeps) and the length of c.
func (it *item) setContent(c content) {
	it.xcontent = c
	it.setLen(c.len())
	if c.countable() {
		it.flags |= flagCountable
	} else {
		it.flags &^= flagCountable
	}
}

// detached returns the content of an Item as a content value (sharing the item's data: the
// caller only reads it).
func (it *item) detached() content { return it.xcontent }

// dropContent replaces the content by deleted content of the same length (JS
// ContentDeleted); a GC struct is left without content.
func (it *item) dropContent() {
	it.flags &^= flagCountable
	if it.isGC() {
		it.xcontent = nil
		return
	}
	it.xcontent = &contentDeleted{n: it.len()}
}

// str returns the UTF-8 of a string item (nil for other contents).
func (it *item) str() []byte {
	if c, ok := it.xcontent.(*contentString); ok {
		return c.b
	}
	return nil
}

// isString reports whether the item holds a string.
func (it *item) isString() bool { return !it.isGC() && it.xcontent.ref() == refString }

// format returns the formatting mark of the item, or nil.
func (it *item) format() *contentFormat {
	f, _ := it.xcontent.(*contentFormat)
	return f
}

// childType returns the nested type the item holds, or nil.
func (it *item) childType() *Type {
	if c, ok := it.xcontent.(*contentType); ok {
		return c.t
	}
	return nil
}

// subdoc returns the subdocument the item holds, or nil.
func (it *item) subdoc() *Doc {
	if c, ok := it.xcontent.(*contentDoc); ok {
		return c.doc
	}
	return nil
}

// values appends the values of the content (JS getContent) to dst.
func (it *item) values(dst []any) []any { return it.xcontent.appendValues(dst) }

// writeContent encodes the content from offset on.
func (it *item) writeContent(e *lib0.Encoder, offset uint64) { it.xcontent.write(e, offset) }

// spliceContent moves the content from offset on to right (a new item), and sets the
// lengths of both.
func (it *item) spliceContent(right *item, offset uint64) {
	n := it.len()
	right.xcontent = it.xcontent.splice(offset)
	right.setLen(n - offset)
	it.setLen(offset)
}

// cutContent drops the content before offset (the units known already when an item is
// integrated from offset on).
func (it *item) cutContent(offset uint64) {
	it.xcontent = it.xcontent.splice(offset)
	it.setLen(it.len() - offset)
}

// mergeContent appends the content of right (of the same ref) and its length, and reports
// whether it could.
func (it *item) mergeContent(right *item) bool {
	if !it.xcontent.merge(right.xcontent) {
		return false
	}
	it.setLen(it.len() + right.len())
	return true
}
