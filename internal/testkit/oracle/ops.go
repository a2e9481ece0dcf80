package oracle

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// RootType is how a root type is instantiated before updates are applied, and so how it is
// rendered: map → object, array → array, text → string, xml → its toString().
type RootType string

const (
	Map   RootType = "map"   // Y.Map
	Array RootType = "array" // Y.Array
	Text  RootType = "text"  // Y.Text
	XML   RootType = "xml"   // Y.XmlFragment
)

// Versions are the versions the oracle process runs.
type Versions struct {
	Node       string `json:"node"`
	Yjs        string `json:"yjs"`
	Lib0       string `json:"lib0"`
	YProtocols string `json:"yProtocols"`
}

// Ping reports the versions of node and of the npm packages the oracle loaded.
func (c *Client) Ping() (Versions, error) {
	var v Versions
	err := c.Call("ping", nil, &v)
	return v, err
}

// ApplyRequest applies Updates in order to a fresh Y.Doc.
type ApplyRequest struct {
	Updates [][]byte `json:"updates"`
	// Roots are instantiated with their types before the updates are applied, and only they
	// are rendered. Nil: every root of the document, its type inferred by the rule nmcr doc json follows
	// (keyed items → map; string, format or embed content → text; otherwise array).
	Roots map[string]RootType `json:"roots,omitempty"`
	// StateVectors: for each, ApplyResult.Diffs holds encodeStateAsUpdate(doc, sv).
	StateVectors [][]byte `json:"stateVectors,omitempty"`
	// NoGC creates the doc with gc: false (deleted content is kept). Default: gc on.
	NoGC bool `json:"noGC,omitempty"`
	// Deltas asks for ApplyResult.Deltas.
	Deltas bool `json:"deltas,omitempty"`
}

// ApplyResult is the document after an apply.
type ApplyResult struct {
	Roots map[string]RootType `json:"roots"` // the rendered roots and their types
	JSON  json.RawMessage     `json:"json"`  // {root: toJSON()} under the JSON rules
	// Deltas holds each text root's toDelta() (its formatting) when ApplyRequest.Deltas.
	Deltas      json.RawMessage `json:"deltas,omitempty"`
	StateVector []byte          `json:"stateVector"` // Y.encodeStateVector(doc)
	State       []byte          `json:"state"`       // Y.encodeStateAsUpdate(doc)
	Diffs       [][]byte        `json:"diffs"`       // Y.encodeStateAsUpdate(doc, sv) per request sv
	Pending     bool            `json:"pending"`     // pendingStructs or pendingDs left: delivery incomplete
}

// Apply applies updates in order to a fresh JS Y.Doc (Y.applyUpdate) and renders it. An
// update JS rejects yields an *Error naming its index.
func (c *Client) Apply(req ApplyRequest) (ApplyResult, error) {
	var r ApplyResult
	err := c.Call("apply", req, &r)
	return r, err
}

// Merge is Y.mergeUpdates.
func (c *Client) Merge(updates [][]byte) ([]byte, error) {
	var r struct{ Update []byte }
	err := c.Call("merge", map[string]any{"updates": updates}, &r)
	return r.Update, err
}

// Diff is Y.diffUpdate(update, sv).
func (c *Client) Diff(update, sv []byte) ([]byte, error) {
	var r struct{ Update []byte }
	err := c.Call("diff", map[string]any{"update": update, "stateVector": sv}, &r)
	return r.Update, err
}

// StateVectorFromUpdate is Y.encodeStateVectorFromUpdate.
func (c *Client) StateVectorFromUpdate(update []byte) ([]byte, error) {
	var r struct{ StateVector []byte }
	err := c.Call("svFromUpdate", map[string]any{"update": update}, &r)
	return r.StateVector, err
}

// DecodeStateVector is Y.decodeStateVector: client → clock.
func (c *Client) DecodeStateVector(sv []byte) (map[uint32]uint64, error) {
	var r struct{ Clocks map[uint32]uint64 }
	err := c.Call("decodeSV", map[string]any{"stateVector": sv}, &r)
	return r.Clocks, err
}

// EncodeStateVector is Y.encodeStateVector of a client → clock map.
func (c *Client) EncodeStateVector(clocks map[uint32]uint64) ([]byte, error) {
	m := make(map[string]uint64, len(clocks))
	for client, clock := range clocks {
		m[strconv.FormatUint(uint64(client), 10)] = clock
	}
	var r struct{ StateVector []byte }
	err := c.Call("encodeSV", map[string]any{"clocks": m}, &r)
	return r.StateVector, err
}

// DecodedUpdate is Y.decodeUpdate rendered for reading: a diagnostic view of an update.
type DecodedUpdate struct {
	Structs   []DecodedStruct `json:"structs"`
	DeleteSet []DeleteRange   `json:"deleteSet"`
}

// ID is a Yjs struct id: [client, clock].
type ID [2]uint64

// DecodedStruct is one struct of an update.
type DecodedStruct struct {
	Struct      string `json:"struct"` // "item", "gc" or "skip"
	ID          ID     `json:"id"`
	Length      uint64 `json:"length"`
	Origin      *ID    `json:"origin,omitempty"`
	RightOrigin *ID    `json:"rightOrigin,omitempty"`
	// Parent is a root name (JSON string), an item id ([client, clock]) or null (the parent
	// is the origin's); absent for gc and skip.
	Parent    json.RawMessage `json:"parent,omitempty"`
	ParentSub *string         `json:"parentSub,omitempty"`
	// Content: {"kind": "string"|"any"|"json"|"binary"|"deleted"|"embed"|"format"|"doc"|"type", ...}.
	Content json.RawMessage `json:"content,omitempty"`
}

// DeleteRange is one range of a delete set.
type DeleteRange struct {
	Client uint32 `json:"client"`
	Clock  uint64 `json:"clock"`
	Len    uint64 `json:"len"`
}

// DecodeUpdate is Y.decodeUpdate, rendered for reading.
func (c *Client) DecodeUpdate(update []byte) (DecodedUpdate, error) {
	var r DecodedUpdate
	err := c.Call("decodeUpdate", map[string]any{"update": update}, &r)
	return r, err
}

// Feature names for HistoryRequest.Features. All are on by default except
// FeatureSplitSurrogates.
const (
	FeatureMap             = "map"             // ops on the root Y.Map "map"
	FeatureArray           = "array"           // ops on the root Y.Array "array"
	FeatureText            = "text"            // ops on the root Y.Text "text"
	FeatureXML             = "xml"             // ops on the root Y.XmlFragment "xml": elements, attributes, Y.XmlText
	FeatureNested          = "nested"          // nested Y.Map/Y.Array/Y.Text/Y.Xml* values, edited later
	FeatureSubdoc          = "subdoc"          // subdocuments (ContentDoc)
	FeatureBinary          = "binary"          // Uint8Array values (ContentBinary and inside any)
	FeatureBigint          = "bigint"          // bigint inside any values
	FeatureUndefined       = "undefined"       // undefined values
	FeatureNegZero         = "negZero"         // -0
	FeatureNonFinite       = "nonFinite"       // NaN, ±Infinity
	FeatureFormat          = "format"          // text formatting attributes
	FeatureEmbed           = "embed"           // text embeds
	FeatureAstral          = "astral"          // strings outside the BMP (surrogate pairs)
	FeatureSplitSurrogates = "splitSurrogates" // off by default: text positions inside surrogate pairs (JS itself diverges then)
	FeatureSync            = "sync"            // partial syncs between steps
	FeatureOutOfOrder      = "outOfOrder"      // single updates delivered out of causal order
	FeatureTransactions    = "transactions"    // several ops per transaction
)

// HistoryRequest asks for a random, reproducible multi-client editing history.
type HistoryRequest struct {
	Seed    uint64 `json:"seed"`              // at most 2^53−1
	Clients int    `json:"clients,omitempty"` // 1–32; 0 means 3
	Steps   int    `json:"steps,omitempty"`   // transactions; 0 means 50
	NoGC    bool   `json:"noGC,omitempty"`    // clients run with gc: false
	// Features switches generator features on or off (see the Feature constants); unknown
	// names are an error.
	Features map[string]bool `json:"features,omitempty"`
}

// History is the outcome of a random history: every local transaction's update in creation
// order, and the converged document (all updates applied in order to a fresh doc; the
// oracle has checked that every client converged to it).
type History struct {
	Seed        uint64              `json:"seed"`
	Clients     []uint32            `json:"clients"` // the clients' Yjs client ids
	Updates     []HistoryUpdate     `json:"updates"`
	Roots       map[string]RootType `json:"roots"` // map: map, array: array, text: text, xml: xml
	JSON        json.RawMessage     `json:"json"`
	StateVector []byte              `json:"stateVector"`
	State       []byte              `json:"state"` // encodeStateAsUpdate of the converged doc
}

// HistoryUpdate is one transaction's update.
type HistoryUpdate struct {
	Client uint32 `json:"client"` // the author's client id
	Update []byte `json:"update"`
	Desc   string `json:"desc"` // the operations, for failure messages
}

// UpdateBytes returns the updates in creation order.
func (h History) UpdateBytes() [][]byte {
	out := make([][]byte, len(h.Updates))
	for i, u := range h.Updates {
		out[i] = u.Update
	}
	return out
}

// History generates a random history in JS. Equal requests give byte-identical histories.
func (c *Client) History(req HistoryRequest) (History, error) {
	if req.Seed > 1<<53-1 {
		return History{}, fmt.Errorf("oracle history: seed %d exceeds 2^53-1", req.Seed)
	}
	var h History
	err := c.Call("history", req, &h)
	return h, err
}

// B4Timings is the JS side of the B4 benchmark: medians of Runs runs after one warm-up, in
// milliseconds.
type B4Timings struct {
	Ops            int     `json:"ops"`
	Runs           int     `json:"runs"`
	FinalLength    int     `json:"finalLength"`    // Y.Text length after every op (104,852 for the real trace)
	DecodedLength  int     `json:"decodedLength"`  // the same, read back from the encoded state
	ApplyMs        float64 `json:"applyMs"`        // every op, one transaction each
	ApplyCaptureMs float64 `json:"applyCaptureMs"` // the same, capturing each update
	UpdateCount    int     `json:"updateCount"`
	UpdateBytes    int     `json:"updateBytes"` // total size of the captured updates
	EncodeMs       float64 `json:"encodeMs"`    // encodeStateAsUpdate of the final doc
	StateBytes     int     `json:"stateBytes"`
	DecodeMs       float64 `json:"decodeMs"` // applyUpdate of that state to a fresh doc
	MergeCount     int     `json:"mergeCount"`
	MergeMs        float64 `json:"mergeMs"` // mergeUpdates of the first MergeCount updates
	MergedBytes    int     `json:"mergedBytes"`
	HeapBytes      int64   `json:"heapBytes,omitempty"` // heap held by the final doc (0: not measured)
	Node           string  `json:"node"`
	Yjs            string  `json:"yjs"`
}

// B4 runs the JS side of the B4 benchmark on the trace at path (a JSON array of
// [pos, 0, "text"] inserts and [pos, 1] deletes). It takes tens of seconds.
func (c *Client) B4(path string) (B4Timings, error) {
	var t B4Timings
	err := c.Call("b4", map[string]any{"path": path}, &t)
	return t, err
}
