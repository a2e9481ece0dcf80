package yws

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nomicore/nomicore/lib0"
)

// Message types of the y-websocket protocol: the first varUint of every WebSocket message.
const (
	TypeSync           = 0 // y-protocols sync: a sub-type and its payload
	TypeAwareness      = 1 // an awareness update
	TypeAuth           = 2 // auth: only PermissionDenied, from the server
	TypeQueryAwareness = 3 // ask for every awareness state (no payload)
	// TypeStateless is an application's message that is not stored (varString payload),
	// relayed to the namespace's other editors on this node: the Hocuspocus protocol's
	// stateless message, which a y-websocket application handles with
	// provider.messageHandlers[5].
	TypeStateless = 5
)

// Sync sub-types (y-protocols/sync).
const (
	SyncStep1  = 0 // the sender's state vector
	SyncStep2  = 1 // the update the receiver of a SyncStep1 lacks
	SyncUpdate = 2 // a live update
)

// authPermissionDenied is the only auth sub-type (y-protocols/auth).
const authPermissionDenied = 0

// Message is one decoded client message. Payload aliases the input: a state vector
// (SyncStep1), a Yjs v1 update (SyncStep2, SyncUpdate) or an awareness update; empty for
// TypeQueryAwareness.
type Message struct {
	Type    uint64
	Sync    uint64 // the sync sub-type when Type is TypeSync
	Payload []byte
	// Stateless is the payload of a TypeStateless message.
	Stateless string
}

// Name is the message's name in metrics and logs.
func (m Message) Name() string {
	switch m.Type {
	case TypeSync:
		switch m.Sync {
		case SyncStep1:
			return "sync-step1"
		case SyncStep2:
			return "sync-step2"
		}
		return "update"
	case TypeAwareness:
		return "awareness"
	case TypeQueryAwareness:
		return "query-awareness"
	case TypeStateless:
		return "stateless"
	}
	return "auth"
}

// The two classes of bad client input; each closes the connection with its WebSocket
// status (RFC 6455, section 7.4.1).
var (
	// ErrUnsupported: a message type or sync sub-type this endpoint does not take (status
	// 1003, unsupported data) — including auth messages, which only a server sends.
	ErrUnsupported = errors.New("unsupported message")
	// ErrMalformed: bytes that do not decode — truncated, trailing bytes, a non-canonical or
	// out-of-range number, invalid UTF-8 or JSON (status 1007, invalid payload data).
	ErrMalformed = errors.New("malformed message")
)

// DecodeMessage decodes one client message strictly: exactly one message, nothing after
// it. Errors wrap ErrUnsupported or ErrMalformed. It never allocates from a length it has
// not checked against the input.
func DecodeMessage(b []byte) (Message, error) {
	d := lib0.NewDecoder(b)
	m := Message{Type: d.ReadVarUint()}
	if err := d.Err(); err != nil {
		return Message{}, fmt.Errorf("%w: message type: %v", ErrMalformed, err)
	}
	switch m.Type {
	case TypeSync:
		m.Sync = d.ReadVarUint()
		if d.Err() == nil && m.Sync > SyncUpdate {
			return Message{}, fmt.Errorf("%w: sync message type %d", ErrUnsupported, m.Sync)
		}
		m.Payload = d.ReadVarUint8Array()
	case TypeAwareness:
		m.Payload = d.ReadVarUint8Array()
	case TypeQueryAwareness:
	case TypeStateless:
		m.Stateless = d.ReadVarString()
	default:
		return Message{}, fmt.Errorf("%w: message type %d", ErrUnsupported, m.Type)
	}
	if err := d.Finish(); err != nil {
		return Message{}, fmt.Errorf("%w: %s: %v", ErrMalformed, m.Name(), err)
	}
	return m, nil
}

// AppendSync appends a sync message of sub-type sync carrying payload.
func AppendSync(dst []byte, sync uint64, payload []byte) []byte {
	dst = lib0.AppendVarUint(dst, TypeSync)
	dst = lib0.AppendVarUint(dst, sync)
	return lib0.AppendVarUint8Array(dst, payload)
}

// AppendSyncHead appends what precedes a payload of n bytes in a sync message: the message
// is AppendSyncHead(dst, sync, len(payload)) followed by payload.
func AppendSyncHead(dst []byte, sync uint64, n int) []byte {
	dst = lib0.AppendVarUint(dst, TypeSync)
	dst = lib0.AppendVarUint(dst, sync)
	return lib0.AppendVarUint(dst, uint64(n))
}

// AppendAwareness appends an awareness message carrying an encoded awareness update.
func AppendAwareness(dst []byte, update []byte) []byte {
	dst = lib0.AppendVarUint(dst, TypeAwareness)
	return lib0.AppendVarUint8Array(dst, update)
}

// AppendPermissionDenied appends an auth PermissionDenied message with a reason the editor
// shows (y-websocket logs it as a warning; the connection stays open).
func AppendPermissionDenied(dst []byte, reason string) []byte {
	dst = lib0.AppendVarUint(dst, TypeAuth)
	dst = lib0.AppendVarUint(dst, authPermissionDenied)
	return lib0.AppendVarString(dst, reason)
}

// AppendStateless appends a stateless message carrying payload.
func AppendStateless(dst []byte, payload string) []byte {
	dst = lib0.AppendVarUint(dst, TypeStateless)
	return lib0.AppendVarString(dst, payload)
}

// keepAliveMessage is an awareness update with no entries: the provider counts it as a
// message heard (it reconnects after 30 s of silence) and applies nothing.
var keepAliveMessage = AppendAwareness(nil, []byte{0})

// AwarenessEntry is one client's entry in an awareness update: its clock and its state as
// JSON text ("null" removes the state).
type AwarenessEntry struct {
	ClientID uint64
	Clock    uint64
	State    []byte // JSON text, aliasing the input
}

// Removed reports whether the entry removes the client's state.
func (e AwarenessEntry) Removed() bool { return string(e.State) == "null" }

// DecodeAwareness decodes an awareness update of at most maxEntries entries, each state at
// most maxStateBytes of valid JSON. Errors wrap ErrMalformed; an entry over maxStateBytes
// is not an error: its State is nil and the caller drops it.
func DecodeAwareness(b []byte, maxEntries, maxStateBytes int) ([]AwarenessEntry, error) {
	d := lib0.NewDecoder(b)
	// Each entry takes at least 3 bytes (two varUints and a length), which bounds the
	// count by the input before anything is allocated.
	n := d.ReadCount(maxEntries, 3)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%w: awareness entry count: %v", ErrMalformed, err)
	}
	out := make([]AwarenessEntry, 0, n)
	for range n {
		e := AwarenessEntry{ClientID: d.ReadVarUint(), Clock: d.ReadVarUint()}
		state := d.ReadVarStringBytes()
		if d.Err() != nil {
			break
		}
		if len(state) <= maxStateBytes {
			if !json.Valid(state) {
				return nil, fmt.Errorf("%w: awareness state of client %d is not JSON", ErrMalformed, e.ClientID)
			}
			e.State = state
		}
		out = append(out, e)
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("%w: awareness: %v", ErrMalformed, err)
	}
	return out, nil
}

// AppendAwarenessUpdate appends an encoded awareness update (y-protocols
// encodeAwarenessUpdate) of entries.
func AppendAwarenessUpdate(dst []byte, entries []AwarenessEntry) []byte {
	dst = lib0.AppendVarUint(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = lib0.AppendVarUint(dst, e.ClientID)
		dst = lib0.AppendVarUint(dst, e.Clock)
		dst = lib0.AppendVarUint8Array(dst, e.State)
	}
	return dst
}
