// Package yjs is a Yjs-compatible CRDT document: the document model of the JavaScript yjs
// 13.6 line (client ids, a struct store per client, items with origins and parents, GC and
// Skip structs, every content type), the YATA integration algorithm, delete sets, pending
// structs for out-of-order updates, struct merging and garbage collection, and the update
// format v1. Bytes we produce are applied identically by JS yjs and vice versa, and for the
// same updates EncodeStateAsUpdate, MergeUpdates and DiffUpdate give JS's bytes. The rest of
// the project keeps every namespace's content in a Doc and moves it as v1 updates.
//
// # Basics
//
// A Doc holds named root types: GetMap, GetArray, GetText, GetXmlFragment (or Get with a
// Kind). Every change happens in a transaction: Doc.Transact groups changes, and a method
// called outside Transact opens its own. After each transaction that changed anything the
// OnUpdate (or OnUpdateEvent) handlers receive the v1 update of that transaction with its
// origin; that is how local changes leave a document.
//
//	d := yjs.NewDoc()
//	d.OnUpdate(func(update []byte, origin any) { send(update) })
//	_ = d.GetText("body").Insert(0, "hello", nil)
//
// ApplyUpdate integrates a remote update. Two replicas sync by exchanging state vectors
// (Doc.EncodeStateVector) and the updates each lacks (EncodeStateAsUpdate with the other's
// state vector). MergeUpdates, DiffUpdate and EncodeStateVectorFromUpdate work on encoded
// updates without a document. ConvertUpdateV2ToV1 and ApplyUpdateV2 read the update format
// v2 (JS encodeStateAsUpdateV2); the package writes only v1. InspectUpdate tells, read-only,
// what an update would do to one root (the registry uses it to refuse updates that touch its
// protected root), and Included whether an update would change anything at all. ToJSON
// renders a document by the project's JSON rules (docs/decisions.md#yjs).
//
// Nested types are inserted as preliminary values (NewMap, NewArray, NewText,
// NewXmlElement, NewXmlText, NewXmlFragment) and read back as *Map, *Array, … Subdocuments
// are *Doc values (NewSubdoc). A preliminary type can be filled before it is inserted; each
// change to it returns the error the same change would return in a document, and
// inserting it checks everything it holds first, so nothing it holds is lost on the way.
//
// Lengths and indexes in sequences are those of Yjs: for Text they count UTF-16 code units
// (as JS String.length does; a position inside a surrogate pair splits it into two U+FFFD
// as in JS), for Array one unit per element. An index or length out of range is
// ErrIndexOutOfRange and changes nothing.
//
// # Concurrency and errors
//
// A Doc is not safe for concurrent use: one goroutine owns it, and update handlers run on
// that goroutine, inside the call that made the change. The package does no I/O and reads
// no clock; the only randomness (client ids, guids) comes from the source given with
// WithRandom (crypto/rand by default).
//
// Decoding is strict and bounded: malformed or hostile input returns a *DecodeError before
// anything is applied. It is stricter than JS yjs in a few documented places (non-shortest
// varints, invalid UTF-8, trailing bytes, zero-length structs and delete ranges, parent-info
// values other than 0 and 1, references to an own-client clock at or after the referring
// struct, a client listed twice); no conforming writer produces those. A broken invariant
// while applying is an *InternalError: the document must then be discarded.
package yjs

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"io"

	"github.com/nomicore/nomicore/lib0"
)

// Doc is a Yjs document. It is not safe for concurrent use: one goroutine owns it.
type Doc struct {
	clientID uint64
	gc       bool
	guid     string
	random   io.Reader

	store       structStore
	roots       map[string]*Type
	pending     *pendingStructs // structs waiting for missing dependencies
	pendingDels *deleteSet      // deletions of structs not yet received

	tx       *Transaction   // the open transaction
	cleanups []*Transaction // transactions to clean up, in order
	spareTx  *Transaction

	updateHandlers []*updateHandler

	// subdocument state
	subdocs    map[*Doc]struct{}
	item       *item // the item holding this document, when it is a subdocument
	shouldLoad bool
	autoLoad   bool
	meta       any // nil when unset

	// olderDeleteWalk makes remote deletions walk their ranges the way versions of this
	// package before the struct-list fix did (ReplayAsOlderVersions).
	olderDeleteWalk bool

	open          openString // the string that grows in place as it is typed
	text          textBytes  // the bytes of text kept and dropped (compactStrings)
	yata          yataScratch
	scratch       lib0.Encoder // reused for transaction updates
	stateSizeHint int          // size of the last full state encoded
	startsScratch []clientClock
}

// pendingStructs is an update of structs whose dependencies are missing, with the lowest
// missing clock per client that would make it worth retrying.
type pendingStructs struct {
	missing StateVector
	update  []byte
}

type updateHandler struct {
	fn func(UpdateEvent)
}

// Option configures a new Doc.
type Option func(*Doc)

// WithClientID sets the client id (otherwise a random uint32).
func WithClientID(id uint32) Option { return func(d *Doc) { d.clientID = uint64(id) } }

// WithGC switches garbage collection of deleted content (on by default).
func WithGC(on bool) Option { return func(d *Doc) { d.gc = on } }

// WithGUID sets the document guid (otherwise a random UUID v4).
func WithGUID(guid string) Option { return func(d *Doc) { d.guid = guid } }

// WithRandom sets the source of randomness for client ids and guids (crypto/rand by
// default).
func WithRandom(r io.Reader) Option { return func(d *Doc) { d.random = r } }

// NewDoc returns an empty document.
func NewDoc(opts ...Option) *Doc {
	d := &Doc{
		gc:         true,
		random:     rand.Reader,
		store:      newStructStore(),
		roots:      make(map[string]*Type),
		subdocs:    make(map[*Doc]struct{}),
		shouldLoad: true,
		clientID:   1 << 63, // sentinel: replaced below unless WithClientID
	}
	for _, o := range opts {
		o(d)
	}
	if d.clientID == 1<<63 {
		d.clientID = d.newClientID()
	}
	if d.guid == "" {
		d.guid = d.newUUID()
	}
	return d
}

// ClientID returns the id this document writes its own changes under.
func (d *Doc) ClientID() uint64 { return d.clientID }

// GUID returns the document guid.
func (d *Doc) GUID() string { return d.guid }

// GC reports whether deleted content is garbage-collected.
func (d *Doc) GC() bool { return d.gc }

func (d *Doc) readRandom(b []byte) {
	if _, err := io.ReadFull(d.random, b); err != nil {
		panic("yjs: random source failed: " + err.Error())
	}
}

func (d *Doc) newClientID() uint64 {
	var b [4]byte
	d.readRandom(b[:])
	return uint64(binary.LittleEndian.Uint32(b[:]))
}

func (d *Doc) newUUID() string {
	var b [16]byte
	d.readRandom(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// UpdateEvent describes a transaction that changed the document.
type UpdateEvent struct {
	Update []byte // the v1 update of the transaction (a fresh slice)
	Origin any    // the origin given to Transact or ApplyUpdate
	Local  bool   // started by a local change, not by ApplyUpdate
	// Unlocked: the transaction of an ApplyUpdate also integrated structs or deletions that
	// were waiting as pending (they came in earlier updates, possibly from other origins),
	// so Update carries more than the applied update: it must not be suppressed as an echo
	// of Origin (docs/protocol.md#document-layout).
	Unlocked bool
}

// OnUpdate registers fn to receive, after every transaction that changed the document, the
// v1 update of that transaction and its origin (see OnUpdateEvent for more). Handlers run
// synchronously in registration order. It returns a function that removes the handler.
func (d *Doc) OnUpdate(fn func(update []byte, origin any)) (unsubscribe func()) {
	return d.OnUpdateEvent(func(ev UpdateEvent) { fn(ev.Update, ev.Origin) })
}

// OnUpdateEvent registers fn to receive an UpdateEvent after every transaction that changed
// the document. Handlers run synchronously in registration order; each gets its own copy
// of the update. A handler that panics is recovered and ignored (the document is already
// consistent when handlers run). It returns a function that removes the handler.
func (d *Doc) OnUpdateEvent(fn func(UpdateEvent)) (unsubscribe func()) {
	h := &updateHandler{fn: fn}
	d.updateHandlers = append(d.updateHandlers, h)
	return func() {
		for i, x := range d.updateHandlers {
			if x == h {
				d.updateHandlers = append(d.updateHandlers[:i:i], d.updateHandlers[i+1:]...)
				return
			}
		}
	}
}

func (d *Doc) emitUpdate(update []byte, tx *Transaction) {
	handlers := d.updateHandlers
	for i, h := range handlers {
		u := update
		if i > 0 {
			u = append([]byte(nil), update...)
		}
		callHandler(h.fn, UpdateEvent{Update: u, Origin: tx.origin, Local: tx.local, Unlocked: tx.unlocked})
	}
}

func callHandler(fn func(UpdateEvent), ev UpdateEvent) {
	defer func() { _ = recover() }()
	fn(ev)
}

// StateVector returns the state vector of the document.
func (d *Doc) StateVector() StateVector { return d.store.stateVector() }

// HasPending reports whether structs or deletions wait for missing dependencies.
func (d *Doc) HasPending() bool { return d.pending != nil || d.pendingDels != nil }

// StructCounts returns, per client, how many structs of the document's store it owns (after
// merging): a measure of how fragmented the document is, which operators' tools report.
func (d *Doc) StructCounts() map[uint64]int {
	out := make(map[uint64]int, len(d.store.clients))
	for c, l := range d.store.clients {
		out[c] = l.n
	}
	return out
}

// PendingBytes returns the encoded size of the structs and deletions waiting for missing
// dependencies. JS yjs does not bound them; a caller that applies updates from untrusted
// peers can watch this and refuse updates beyond its own limit.
func (d *Doc) PendingBytes() int {
	n := 0
	if d.pending != nil {
		n += len(d.pending.update)
	}
	if d.pendingDels != nil {
		for _, en := range d.pendingDels.entries {
			n += 10 + 16*len(en.ranges)
		}
	}
	return n
}

// Subdocs returns the subdocuments currently in the document.
func (d *Doc) Subdocs() []*Doc {
	out := make([]*Doc, 0, len(d.subdocs))
	for s := range d.subdocs {
		out = append(out, s)
	}
	return out
}

// ShouldLoad reports whether a subdocument asked to be loaded (autoLoad or shouldLoad).
func (d *Doc) ShouldLoad() bool { return d.shouldLoad }

// AutoLoad reports the autoLoad option of a subdocument.
func (d *Doc) AutoLoad() bool { return d.autoLoad }

// Meta returns the meta option of a subdocument (nil when unset).
func (d *Doc) Meta() any { return d.meta }

// NewSubdoc returns a document to insert into another as a subdocument.
func NewSubdoc(guid string, opts ...SubdocOption) *Doc {
	d := NewDoc(WithGUID(guid))
	for _, o := range opts {
		o(d)
	}
	return d
}

// SubdocOption configures a subdocument created with NewSubdoc.
type SubdocOption func(*Doc)

// SubdocMeta sets the meta value carried with the subdocument (a lib0 any value).
func SubdocMeta(meta any) SubdocOption { return func(d *Doc) { d.meta = meta } }

// SubdocAutoLoad sets autoLoad.
func SubdocAutoLoad(on bool) SubdocOption { return func(d *Doc) { d.autoLoad = on } }

// SubdocGC sets the gc option carried with the subdocument.
func SubdocGC(on bool) SubdocOption { return func(d *Doc) { d.gc = on } }

// subdocOptions are the options written with a subdocument (JS ContentDoc.opts).
func (d *Doc) subdocOptions() lib0.Object {
	o := lib0.Object{}
	if !d.gc {
		o = append(o, lib0.Field{Key: "gc", Value: false})
	}
	if d.autoLoad {
		o = append(o, lib0.Field{Key: "autoLoad", Value: true})
	}
	if d.meta != nil {
		o = append(o, lib0.Field{Key: "meta", Value: d.meta})
	}
	return o
}

// jsTruthy is JS ToBoolean for values of the lib0 model.
func jsTruthy(v any) bool {
	switch x := v.(type) {
	case nil, lib0.Undefined:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && x == x
	case lib0.BigInt:
		return x != 0
	case string:
		return x != ""
	}
	return true
}
