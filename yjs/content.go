package yjs

import (
	"unicode/utf8"
	"unsafe"

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
	e.WriteVarUint8Array(stringTail(c.b, c.u16, offset))
}

// stringTail returns the UTF-8 of the units from offset on of b (u16 units long; U+FFFD
// for a lone low surrogate).
func stringTail(b []byte, u16, offset uint64) []byte {
	if offset == 0 {
		return b
	}
	if uint64(len(b)) == u16 {
		return b[offset:]
	}
	at, inPair := utf16Offset(b, offset)
	if inPair {
		return append([]byte("\uFFFD"), b[at+4:]...)
	}
	return b[at:]
}

func (c *contentString) appendValues(dst []any) []any { return appendStringValues(dst, c.b) }

// appendStringValues appends the values of a string content (JS str.split with an empty
// separator): one string per UTF-16 code unit; halves of a pair become U+FFFD.
func appendStringValues(dst []any, b []byte) []any {
	for s := b; len(s) > 0; {
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

// The content of an item is kept in the item itself (its ref and data, see item) and read and
// changed through the methods below. data by content ref:
//
//	refGC, refDeleted   nil (the length is the item's)
//	refString           the UTF-8 bytes; with flagStrHeader (text beyond ASCII) they follow
//	                    their byte count as a varUint, otherwise the count is the length
//	refType             *Type
//	refDoc              *Doc
//	refJSON, refBinary, refEmbed, refFormat, refAny: the content value (*contentJSON …)
//
// String bytes may be shared: the right part of a split ASCII string points into its left
// part's bytes, and the strings of one decoded update share one buffer. Bytes are never
// changed once an item points to them, except in a document's open string (openString).

// contentRef is the content ref of the item (refGC for a GC struct).
func (it *item) contentRef() uint8 { return it.ref }

// setContent gives a new item its content c (which it keeps) and the length of c.
func (it *item) setContent(c content) {
	it.ref = c.ref()
	it.setLen(c.len())
	if c.countable() {
		it.flags |= flagCountable
	} else {
		it.flags &^= flagCountable
	}
	var p unsafe.Pointer
	switch x := c.(type) {
	case *contentDeleted:
	case *contentString:
		it.setString(x.b, x.ascii())
		return
	case *contentType:
		p = unsafe.Pointer(x.t)
	case *contentDoc:
		p = unsafe.Pointer(x.doc)
	case *contentJSON:
		p = unsafe.Pointer(x)
	case *contentBinary:
		p = unsafe.Pointer(x)
	case *contentEmbed:
		p = unsafe.Pointer(x)
	case *contentFormat:
		p = unsafe.Pointer(x)
	case *contentAny:
		p = unsafe.Pointer(x)
	default:
		panic("yjs: unknown content")
	}
	it.setCData(p)
	it.flags &^= flagStrHeader
}

// setString makes b (valid UTF-8, never changed afterwards) the string data of the item.
// ASCII text is kept as it is; other text is copied after its byte count.
func (it *item) setString(b []byte, ascii bool) {
	if ascii {
		it.setCData(unsafe.Pointer(unsafe.SliceData(b)))
		it.flags &^= flagStrHeader
		return
	}
	it.setStringCopy(string(b), false)
}

// setStringCopy makes a copy of s (valid UTF-8) the string data of the item.
func (it *item) setStringCopy(s string, ascii bool) {
	if ascii {
		it.setCData(unsafe.Pointer(unsafe.SliceData([]byte(s))))
		it.flags &^= flagStrHeader
		return
	}
	buf := make([]byte, 0, lib0.VarUintLen(uint64(len(s)))+len(s))
	buf = lib0.AppendVarUint(buf, uint64(len(s)))
	buf = append(buf, s...)
	it.setCData(unsafe.Pointer(unsafe.SliceData(buf)))
	it.flags |= flagStrHeader
}

// detached returns the content of an Item as a content value (sharing the item's data: the
// caller only reads it).
func (it *item) detached() content {
	p := it.cdata()
	switch it.ref {
	case refDeleted:
		return &contentDeleted{n: it.len()}
	case refString:
		return &contentString{b: it.str(), u16: it.len()}
	case refType:
		return &contentType{t: (*Type)(p)}
	case refDoc:
		return &contentDoc{doc: (*Doc)(p)}
	case refJSON:
		return (*contentJSON)(p)
	case refBinary:
		return (*contentBinary)(p)
	case refEmbed:
		return (*contentEmbed)(p)
	case refFormat:
		return (*contentFormat)(p)
	case refAny:
		return (*contentAny)(p)
	}
	panic("yjs: detached content of a GC struct")
}

// dropContent replaces the content by deleted content of the same length (JS
// ContentDeleted); a GC struct is left without content.
func (it *item) dropContent() {
	it.flags &^= flagCountable | flagStrHeader
	it.setCData(nil)
	if it.isGC() {
		it.ref = refGC
	} else {
		it.ref = refDeleted
	}
}

// str returns the UTF-8 of a string item (nil for other contents). The slice is capped: it
// must not be appended to in place.
func (it *item) str() []byte {
	if it.ref != refString {
		return nil
	}
	p := it.cdata()
	if it.flags&flagStrHeader == 0 {
		return unsafe.Slice((*byte)(p), it.len())
	}
	n, w := readUvarintAt(p)
	return unsafe.Slice((*byte)(unsafe.Add(p, w)), n)
}

// readUvarintAt reads the varUint at p (a string header) and returns it and its width.
func readUvarintAt(p unsafe.Pointer) (uint64, int) {
	var n uint64
	for i := 0; ; i++ {
		b := *(*byte)(unsafe.Add(p, i))
		n |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return n, i + 1
		}
	}
}

// isString reports whether the item holds a string.
func (it *item) isString() bool { return it.ref == refString }

// format returns the formatting mark of the item, or nil.
func (it *item) format() *contentFormat {
	if it.ref != refFormat {
		return nil
	}
	return (*contentFormat)(it.cdata())
}

// childType returns the nested type the item holds, or nil.
func (it *item) childType() *Type {
	if it.ref != refType {
		return nil
	}
	return (*Type)(it.cdata())
}

// subdoc returns the subdocument the item holds, or nil.
func (it *item) subdoc() *Doc {
	if it.ref != refDoc {
		return nil
	}
	return (*Doc)(it.cdata())
}

// values appends the values of the content (JS getContent) to dst.
func (it *item) values(dst []any) []any {
	switch it.ref {
	case refGC, refDeleted:
		return dst
	case refString:
		return appendStringValues(dst, it.str())
	}
	return it.detached().appendValues(dst)
}

// appendContent appends the encoding of the content from offset on. Contents other than
// strings and deleted content are written with *ce, allocated on first use.
func (it *item) appendContent(b []byte, offset uint64, ce **lib0.Encoder) []byte {
	switch it.ref {
	case refDeleted:
		return lib0.AppendVarUint(b, it.len()-offset)
	case refString:
		return lib0.AppendVarUint8Array(b, stringTail(it.str(), it.len(), offset))
	}
	if *ce == nil {
		*ce = lib0.NewEncoder(64)
	}
	e := *ce
	e.Reset()
	switch it.ref {
	case refType:
		(&contentType{t: it.childType()}).write(e, offset)
	case refDoc:
		(&contentDoc{doc: it.subdoc()}).write(e, offset)
	default:
		it.detached().write(e, offset)
	}
	return append(b, e.Bytes()...)
}

// spliceContent moves the content from offset on (0 < offset < length) to right (a new
// item), and sets the lengths of both.
func (it *item) spliceContent(right *item, offset uint64) {
	n := it.len()
	right.ref = it.ref
	right.setLen(n - offset)
	switch it.ref {
	case refDeleted:
	case refString:
		b := it.str()
		if it.flags&flagStrHeader == 0 {
			// ASCII: the right part shares the bytes
			right.setCData(unsafe.Pointer(&b[offset]))
			it.setLen(offset)
			return
		}
		at, inPair := utf16Offset(b, offset)
		if inPair {
			// The split falls between the two halves of a surrogate pair: each side keeps one
			// unit, replaced by U+FFFD.
			rb := append([]byte("\uFFFD"), b[at+4:]...)
			right.setString(rb, false)
			lb := append(b[:at:at], "\uFFFD"...)
			it.setString(lb, false)
		} else {
			// ASCII parts share the bytes; others are copied after a new byte count
			lb, rb := b[:at:at], b[at:]
			right.setString(rb, isASCII(rb))
			it.setString(lb, isASCII(lb))
		}
	default:
		right.setCData(contentData(it.detached().splice(offset)))
	}
	it.setLen(offset)
}

// contentData is the data of a content value that is not a string.
func contentData(c content) unsafe.Pointer {
	switch x := c.(type) {
	case *contentDeleted:
		return nil
	case *contentType:
		return unsafe.Pointer(x.t)
	case *contentDoc:
		return unsafe.Pointer(x.doc)
	case *contentJSON:
		return unsafe.Pointer(x)
	case *contentBinary:
		return unsafe.Pointer(x)
	case *contentEmbed:
		return unsafe.Pointer(x)
	case *contentFormat:
		return unsafe.Pointer(x)
	case *contentAny:
		return unsafe.Pointer(x)
	}
	panic("yjs: unknown content")
}

// cutContent drops the content before offset (the units known already when an item is
// integrated from offset on).
func (it *item) cutContent(offset uint64) {
	rest := &item{}
	it.spliceContent(rest, offset)
	it.ref = rest.ref
	it.flags = it.flags&^flagStrHeader | rest.flags&flagStrHeader
	it.setCData(rest.cdata())
	it.setLen(rest.len())
}

// mergeContent appends the content of right (of the same ref) and its length, and reports
// whether it could. Strings are appended in d's open string when it can take them.
func (it *item) mergeContent(d *Doc, right *item) bool {
	switch it.ref {
	case refDeleted:
	case refString:
		d.mergeStrings(it, right)
	default:
		if !it.detached().merge(right.detached()) {
			return false
		}
	}
	it.setLen(it.len() + right.len())
	return true
}

// openString is the one string of a document that has room to grow in place: the last one
// that absorbed its right neighbour, as typing does keystroke after keystroke. buf holds the
// item's whole string data (its header included) from its start, and its capacity beyond is
// free. The item may have changed since (split, garbage-collected): it is open only while
// its data is still exactly buf's bytes (openFor).
type openString struct {
	it  *item
	buf []byte
}

// openFor returns the open buffer of it when it is still open.
func (d *Doc) openFor(it *item) []byte {
	o := &d.open
	if it == nil || o.it != it || it.ref != refString || it.cdata() != unsafe.Pointer(unsafe.SliceData(o.buf)) {
		return nil
	}
	if hdr, n := stringDataLen(it); hdr+n != len(o.buf) {
		return nil
	}
	return o.buf
}

// stringDataLen returns the header and byte lengths of a string item's data.
func stringDataLen(it *item) (hdr, n int) {
	if it.flags&flagStrHeader == 0 {
		return 0, int(it.len())
	}
	u, w := readUvarintAt(it.cdata())
	return w, int(u)
}

// mergeStrings appends the string of right to the string of left (which keeps its length:
// the caller adds right's).
func (d *Doc) mergeStrings(left, right *item) {
	rb := right.str()
	if buf := d.openFor(left); buf != nil && cap(buf)-len(buf) >= len(rb) {
		switch {
		case left.flags&flagStrHeader == 0 && right.flags&flagStrHeader == 0:
			d.open.buf = append(buf, rb...)
			return
		case left.flags&flagStrHeader != 0:
			hdr, n := stringDataLen(left)
			if lib0.VarUintLen(uint64(n+len(rb))) == hdr {
				lib0.AppendVarUint(buf[:0], uint64(n+len(rb))) // the new byte count, in place
				d.open.buf = append(buf, rb...)
				return
			}
		}
	}
	lb := left.str()
	n := len(lb) + len(rb)
	ascii := left.flags&flagStrHeader == 0 && right.flags&flagStrHeader == 0
	hdr := 0
	if !ascii {
		hdr = lib0.VarUintLen(uint64(n))
	}
	d.closeOpen()
	buf := make([]byte, 0, hdr+n+max(n, 16))
	if !ascii {
		buf = lib0.AppendVarUint(buf, uint64(n))
	}
	buf = append(append(buf, lb...), rb...)
	left.setCData(unsafe.Pointer(unsafe.SliceData(buf)))
	if ascii {
		left.flags &^= flagStrHeader
	} else {
		left.flags |= flagStrHeader
	}
	d.open = openString{it: left, buf: buf}
}

// closeOpen gives the open string, when still open, a buffer of its exact size, and forgets
// it.
func (d *Doc) closeOpen() {
	if buf := d.openFor(d.open.it); buf != nil && cap(buf) > len(buf) {
		d.open.it.setCData(unsafe.Pointer(unsafe.SliceData(append([]byte(nil), buf...))))
	}
	d.open = openString{}
}

// textBytes counts text to tell when compactStrings is worth its walk. Items share string
// buffers (split parts, the strings of one decoded update), so the bytes of
// garbage-collected text stay allocated as long as a live neighbour uses the same buffer.
type textBytes struct {
	kept    int // bytes of text at the last compaction
	added   int // units of text integrated since
	garbage int // bytes of text garbage-collected since
	structs int // structs of the store at the last compaction
}

// compactDue reports whether the garbage exceeds an eighth of the text (and half the
// structs, so that the walk over the store costs little per byte collected).
func (t *textBytes) compactDue() bool {
	return t.garbage > max(4096, (t.kept+t.added)/8, t.structs/2)
}

// compactStrings copies the text of every string item into one new buffer, in store order,
// which frees the buffers that held garbage-collected text.
func (d *Doc) compactStrings() {
	d.closeOpen()
	size, structs := 0, 0
	for _, l := range d.store.clients {
		structs += l.n
		l.each(spos{}, func(it *item) bool {
			if it.ref == refString {
				hdr, n := stringDataLen(it)
				size += hdr + n
			}
			return true
		})
	}
	buf := make([]byte, 0, size)
	for _, l := range d.store.clients {
		// the walk changes string data only, never a list
		l.each(spos{}, func(it *item) bool {
			if it.ref == refString {
				hdr, n := stringDataLen(it)
				at := len(buf)
				buf = append(buf, unsafe.Slice((*byte)(it.cdata()), hdr+n)...)
				it.setCData(unsafe.Pointer(&buf[at]))
			}
			return true
		})
	}
	d.text = textBytes{kept: size, structs: structs}
}

// isASCII reports whether b is ASCII only.
func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
