package yjs

import (
	"math"

	"github.com/nomicore/nomicore/lib0"
)

// Update format v1 (JS UpdateEncoderV1):
//
//	update    = structs deleteSet
//	structs   = varUint(#clients) { varUint(#structs) varUint(client) varUint(clock) struct… }
//	struct    = info(u8) …   info: bits 0-4 content ref (0 GC, 10 Skip, 1-9 Item content),
//	            0x80 origin, 0x40 right origin, 0x20 parentSub
//	GC, Skip  = varUint(length)
//	Item      = [origin ID] [rightOrigin ID]
//	            [if neither origin: varUint(1) varString(root key) | varUint(0) ID(parent item),
//	             then varString(parentSub) if 0x20] content
//	ID        = varUint(client) varUint(clock)
//	deleteSet = varUint(#clients) { varUint(client) varUint(#ranges) { varUint(clock) varUint(len) } }

// Struct kinds of a decoded struct.
const (
	structGC = iota
	structSkip
	structItem
)

// Parent encodings of a decoded item.
const (
	parentNone = iota // copied from the origin or right origin
	parentRoot        // a root type by key
	parentItem        // the type held by the item with parentID
)

// rawStruct is one struct as read from an update.
type rawStruct struct {
	kind        uint8
	id          ID
	length      uint64
	hasOrigin   bool
	hasRight    bool
	origin      ID
	rightOrigin ID
	parent      uint8
	parentKey   string
	parentID    ID
	hasSub      bool
	sub         string
	content     content
	// with structReader.bare: the content ref, and a string's bytes (aliasing the input)
	// and the offset of their byte count in the input; content is nil for strings and
	// deleted content
	ref   uint8
	str   []byte
	strAt int
}

func (s *rawStruct) end() uint64 { return s.id.Clock + s.length }

// structReader reads the struct section of an update one block and one struct at a time,
// validating every rule; errors are sticky in the decoder.
type structReader struct {
	d           *lib0.Decoder
	seen        []uint64            // clients of the blocks read so far (few)
	seenSet     map[uint64]struct{} // the same, once there are many
	descending  bool                // require the clients in descending order (as every writer orders them)
	clientsLeft int
	structsLeft int
	client      uint64
	prevClient  uint64
	blocks      int // blocks read so far
	clock       uint64
	copy        bool // copy string and binary contents out of the input
	// skim: a string content is checked and measured but not kept (the struct's content is
	// nil), for readers that only need the structs' places and lengths.
	skim bool
	// bare: string and deleted contents are left in the struct's ref and str (content nil),
	// for decodeUpdate, which keeps them in items without content values.
	bare bool
}

func newStructReader(d *lib0.Decoder, copyContent bool) *structReader {
	r := &structReader{d: d, copy: copyContent}
	r.clientsLeft = d.ReadCount(math.MaxInt32, 3)
	return r
}

// nextBlock reads the header of the next client block (its client and first clock). It
// returns false after the last block or on a decoding error (check d.Err()).
func (r *structReader) nextBlock() bool {
	d := r.d
	if r.clientsLeft == 0 || d.Err() != nil {
		return false
	}
	r.clientsLeft--
	r.structsLeft = d.ReadCount(math.MaxInt32, 2)
	r.client = d.ReadVarUint()
	r.clock = d.ReadVarUint()
	if d.Err() != nil {
		return false
	}
	// JS applyUpdate keeps only the last block of a client listed twice while mergeUpdates
	// keeps both: such an update means different things to them, so it is refused.
	if r.seenBefore(r.client) {
		d.Fail(ErrDuplicateClient)
		return false
	}
	if r.descending && r.blocks > 0 && r.client > r.prevClient {
		d.Fail(ErrClientOrder)
		return false
	}
	r.blocks++
	r.prevClient = r.client
	return true
}

// seenBefore records client and reports whether an earlier block had it.
func (r *structReader) seenBefore(client uint64) bool {
	if r.seenSet != nil {
		if _, ok := r.seenSet[client]; ok {
			return true
		}
		r.seenSet[client] = struct{}{}
		return false
	}
	for _, c := range r.seen {
		if c == client {
			return true
		}
	}
	r.seen = append(r.seen, client)
	if len(r.seen) > 8 {
		r.seenSet = make(map[uint64]struct{}, 2*len(r.seen))
		for _, c := range r.seen {
			r.seenSet[c] = struct{}{}
		}
	}
	return false
}

// advance reads the next struct of the whole section, across blocks.
func (r *structReader) advance(s *rawStruct) bool {
	for r.structsLeft == 0 {
		if !r.nextBlock() {
			return false
		}
	}
	return r.next(s)
}

// next reads the next struct of the current block into s. It returns false at the end of
// the block or on a decoding error (check d.Err()).
func (r *structReader) next(s *rawStruct) bool {
	d := r.d
	if r.structsLeft == 0 || d.Err() != nil {
		return false
	}
	r.structsLeft--
	*s = rawStruct{id: ID{r.client, r.clock}}
	info := d.ReadUint8()
	if d.Err() != nil {
		return false
	}
	ref := info & 0x1f
	switch {
	case ref == refGC || ref == refSkip:
		if info != ref {
			d.Fail(ErrContentRef)
			return false
		}
		s.kind = structGC
		if ref == refSkip {
			s.kind = structSkip
		}
		s.length = d.ReadVarUint()
	case ref <= refDoc:
		s.kind = structItem
		if info&0x80 != 0 {
			s.hasOrigin = true
			s.origin = r.readID()
		}
		if info&0x40 != 0 {
			s.hasRight = true
			s.rightOrigin = r.readID()
		}
		if !s.hasOrigin && !s.hasRight {
			switch d.ReadVarUint() {
			case 1:
				s.parent = parentRoot
				s.parentKey = d.ReadVarString()
			case 0:
				s.parent = parentItem
				s.parentID = r.readID()
			default:
				d.Fail(ErrParentInfo)
				return false
			}
			if info&0x20 != 0 {
				s.hasSub = true
				s.sub = d.ReadVarString()
			}
		}
		switch {
		case r.skim && ref == refString:
			s.length = uint64(utf16LenBytes(d.ReadVarStringBytes()))
		case r.bare && ref == refString:
			s.strAt = d.Pos()
			s.ref, s.str = ref, d.ReadVarStringBytes()
			s.length = utf16LenBytes(s.str)
		case r.bare && ref == refDeleted:
			s.ref, s.length = ref, d.ReadVarUint()
		default:
			s.content = readContent(d, ref, r.copy)
			s.length = s.content.len()
		}
	default:
		d.Fail(ErrContentRef)
		return false
	}
	if d.Err() != nil {
		return false
	}
	if err := s.invalid(); err != nil {
		d.Fail(err)
		return false
	}
	r.clock += s.length
	return true
}

// invalid returns the rule of a decoded struct that s breaks (ErrSelfReference,
// ErrZeroLength, ErrClockRange), or nil.
func (s *rawStruct) invalid() error {
	switch {
	case s.selfReference():
		return ErrSelfReference
	case s.length == 0:
		return ErrZeroLength
	case s.id.Clock+s.length > maxClock:
		return ErrClockRange
	}
	return nil
}

// selfReference reports an origin, right origin or parent of the struct's own client at or
// after its own clock: impossible in a real history (they existed before it), and fatal to
// the integration order.
func (s *rawStruct) selfReference() bool {
	c := s.id
	return (s.hasOrigin && s.origin.Client == c.Client && s.origin.Clock >= c.Clock) ||
		(s.hasRight && s.rightOrigin.Client == c.Client && s.rightOrigin.Clock >= c.Clock) ||
		(s.parent == parentItem && s.parentID.Client == c.Client && s.parentID.Clock >= c.Clock)
}

func (r *structReader) readID() ID {
	client := r.d.ReadVarUint()
	clock := r.d.ReadVarUint()
	return ID{client, clock}
}

// parseJSONElement reads one element of a legacy ContentJSON: JSON text, or "undefined".
func parseJSONElement(s string) (any, error) {
	if s == "undefined" {
		return undefined, nil
	}
	return parseJSON(s)
}

// readContent reads the content of an Item with the given content ref.
func readContent(d *lib0.Decoder, ref uint8, copyContent bool) content {
	switch ref {
	case refDeleted:
		return &contentDeleted{n: d.ReadVarUint()}
	case refJSON:
		n := d.ReadCount(math.MaxInt32, 1)
		vals := make([]any, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			s := d.ReadVarString()
			if d.Err() != nil {
				break
			}
			v, err := parseJSONElement(s)
			if err != nil {
				d.Fail(err)
				break
			}
			vals = append(vals, v)
		}
		return &contentJSON{vals: vals}
	case refBinary:
		b := d.ReadVarUint8Array()
		if copyContent {
			b = append(make([]byte, 0, len(b)), b...)
		}
		return &contentBinary{b: b}
	case refString:
		// aliases the input: callers that keep it copy it (refFromRaw)
		b := d.ReadVarStringBytes()
		return &contentString{b: b[:len(b):len(b)], u16: utf16LenBytes(b)}
	case refEmbed:
		return &contentEmbed{v: readJSONValue(d)}
	case refFormat:
		key := d.ReadVarString()
		return &contentFormat{key: key, val: readJSONValue(d)}
	case refType:
		kind, ok := kindOfRef(d.ReadVarUint())
		if d.Err() == nil && !ok {
			d.Fail(ErrTypeRef)
		}
		t := newType(kind)
		if kind == KindXmlElement || kind == KindXmlHook {
			t.nodeName = d.ReadVarString()
		}
		return &contentType{t: t}
	case refAny:
		n := d.ReadCount(math.MaxInt32, 1)
		vals := make([]any, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			vals = append(vals, d.ReadAny())
		}
		return &contentAny{vals: vals}
	case refDoc:
		guid := d.ReadVarString()
		opts := d.ReadAny()
		if d.Err() != nil {
			return &contentDoc{doc: &Doc{}}
		}
		s, err := subdocFromOptions(guid, opts)
		if err != nil {
			d.Fail(err)
			return &contentDoc{doc: &Doc{}}
		}
		return &contentDoc{doc: s}
	}
	panic("yjs: unreachable content ref")
}

func readJSONValue(d *lib0.Decoder) any {
	s := d.ReadVarString()
	if d.Err() != nil {
		return nil
	}
	v, err := parseJSON(s)
	if err != nil {
		d.Fail(err)
		return nil
	}
	return v
}

// subdocFromOptions builds a subdocument as JS createDocFromOpts does:
// new Doc({guid, ...opts, shouldLoad: opts.shouldLoad || opts.autoLoad || false}).
func subdocFromOptions(guid string, opts any) (*Doc, error) {
	switch opts.(type) {
	case nil, lib0.Undefined:
		return nil, ErrDocOptions // JS: TypeError reading opts.shouldLoad
	}
	s := &Doc{gc: true, guid: guid, subdocs: make(map[*Doc]struct{}), store: newStructStore(), roots: make(map[string]*Type)}
	o, _ := opts.(lib0.Object)
	if v, ok := o.Get("guid"); ok {
		g, isString := v.(string)
		if !isString {
			return nil, ErrDocOptions // JS would take a non-string or random guid
		}
		s.guid = g
	}
	if v, ok := o.Get("gc"); ok {
		if _, undef := v.(lib0.Undefined); !undef {
			s.gc = jsTruthy(v)
		}
	}
	if v, ok := o.Get("autoLoad"); ok {
		s.autoLoad = jsTruthy(v)
	}
	if v, ok := o.Get("meta"); ok {
		if _, undef := v.(lib0.Undefined); !undef {
			s.meta = v
		}
	}
	shouldLoad := false
	if v, ok := o.Get("shouldLoad"); ok {
		shouldLoad = jsTruthy(v)
	}
	s.shouldLoad = shouldLoad || s.autoLoad
	return s, nil
}

// write encodes a decoded struct from offset on, as JS writes the struct it decoded.
func (s *rawStruct) write(e *lib0.Encoder, offset uint64) {
	switch s.kind {
	case structGC:
		e.WriteUint8(refGC)
		e.WriteVarUint(s.length - offset)
		return
	case structSkip:
		e.WriteUint8(refSkip)
		e.WriteVarUint(s.length - offset)
		return
	}
	origin, hasOrigin := s.origin, s.hasOrigin
	if offset > 0 {
		origin, hasOrigin = ID{s.id.Client, s.id.Clock + offset - 1}, true
	}
	info := s.content.ref()
	if hasOrigin {
		info |= 0x80
	}
	if s.hasRight {
		info |= 0x40
	}
	if s.hasSub {
		info |= 0x20
	}
	e.WriteUint8(info)
	if hasOrigin {
		e.WriteVarUint(origin.Client)
		e.WriteVarUint(origin.Clock)
	}
	if s.hasRight {
		e.WriteVarUint(s.rightOrigin.Client)
		e.WriteVarUint(s.rightOrigin.Clock)
	}
	if !hasOrigin && !s.hasRight {
		switch s.parent {
		case parentRoot:
			e.WriteVarUint(1)
			e.WriteVarString(s.parentKey)
		default:
			e.WriteVarUint(0)
			e.WriteVarUint(s.parentID.Client)
			e.WriteVarUint(s.parentID.Clock)
		}
		if s.hasSub {
			e.WriteVarString(s.sub)
		}
	}
	s.content.write(e, offset)
}
