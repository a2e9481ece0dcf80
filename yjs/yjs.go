// Package yjs is a Yjs-compatible CRDT document: the document model of the JavaScript yjs
// 13.6 line (client ids, a struct store per client, Items with origins and parents, GC and
// Skip structs, every content type), the YATA integration algorithm, delete sets, pending
// structs for out-of-order updates, struct merging and garbage collection, and the update
// format v1 — bytes we produce are applied identically by JS yjs and vice versa, and for the
// same updates EncodeStateAsUpdate, MergeUpdates and DiffUpdate give JS's bytes.
//
// # Basics
//
// A Doc holds named root types: GetMap, GetArray, GetText, GetXmlFragment (or Get with a
// Kind). Every change happens in a transaction: Doc.Transact groups changes, and a method
// called outside Transact opens its own. After each transaction that changed anything the
// OnUpdate (or OnUpdateEvent) handlers receive the v1 update of that transaction with its
// origin. ApplyUpdate integrates a remote update; EncodeStateVector and EncodeStateAsUpdate
// produce the two sync messages. MergeUpdates, DiffUpdate and EncodeStateVectorFromUpdate
// work on encoded updates without a document. ConvertUpdateV2ToV1 and ApplyUpdateV2 read
// the update format v2 (JS encodeStateAsUpdateV2); the package writes only v1.
// InspectUpdate tells, read-only, what an update would do to one root (the registry's
// protected-meta check, GUIDE §4). ToJSON renders a document by the project's JSON rules
// (GUIDE §7).
//
// Nested types are inserted as preliminary values (NewMap, NewArray, NewText,
// NewXmlElement, NewXmlText, NewXmlFragment) and read back as *Map, *Array, … Subdocuments
// are *Doc values (NewSubdoc). A preliminary type can be filled before it is inserted; each
// change to it returns the error the same change would return in a document, and
// inserting it checks everything it holds first, so nothing it holds is lost on the way.
//
// Lengths and indexes in sequences are those of Yjs: for Text they count UTF-16 code units
// (as JS String.length does; a position inside a surrogate pair splits it into two U+FFFD
// as in JS), for Array one unit per element.
//
// # Caveats
//
// A Doc is not safe for concurrent use: one goroutine owns it. The package does no I/O and
// reads no clock; the only randomness (client ids, guids) comes from the source given with
// WithRandom (crypto/rand by default).
//
// Decoding is strict and bounded: malformed or hostile input returns a *DecodeError before
// anything is applied. It is stricter than JS yjs in a few documented places (non-shortest
// varints, invalid UTF-8, trailing bytes, zero-length structs and delete ranges, parent-info
// values other than 0 and 1, references to an own-client clock at or after the referring
// struct, a client listed twice); no conforming writer produces those. A broken invariant
// while applying is an *InternalError: the document must then be discarded.
package yjs
