// Package hocuspocus is the wire format of the Hocuspocus protocol, the one the
// `@hocuspocus/provider` package (3.x and 4.x) speaks: the frames of one WebSocket that
// carries many documents. It reads the frames a provider sends and writes the frames a
// provider reads; the node's endpoint that serves the protocol is package yws.
//
// # Frames
//
// Every WebSocket message is one frame,
//
//	varString(address) · varUint(type) · payload
//
// where the address names the document: its name (for Nomicore, the namespace id), or, for
// a 4.x provider created with sessionAwareness, name · "\0" · sessionId, so that two
// providers of one document can share a socket. Replies carry the address as the client
// wrote it. By type:
//
//	0 Sync            varUint sub-type (0 SyncStep1, 1 SyncStep2, 2 Update) · varUint8Array
//	                  payload (a state vector, or a Yjs v1 update), as in y-protocols/sync
//	1 Awareness       varUint8Array awareness update (y-protocols/awareness)
//	2 Auth            varUint sub-type: 0 Token · varString token [· varString provider
//	                  version, 4.x] (client → server; server → client without a token: send
//	                  your token again), 1 PermissionDenied · varString reason, 2 Authenticated
//	                  · varString scope ("read-write" or "readonly")
//	3 QueryAwareness  nothing (send me every awareness state)
//	4 SyncReply       as Sync, for a server's own connections; not sent by providers
//	5 Stateless       varString payload (an application's message, not stored)
//	6 BroadcastStateless  server-internal; never from a client
//	7 CLOSE           client → server: nothing (close this document); server → client:
//	                  varString reason
//	8 SyncStatus      varUint 1 (the update was saved) or 0 (it was not applied)
//
// and two frames without an address, one byte each: Ping (9), which a 4.x provider answers
// with Pong (10). A 3.x provider cannot read them (it takes the byte for an address that is
// cut short), so they go only to a provider that announced a version with its token.
//
// # Reading
//
// ReadFrame decodes one frame strictly and never allocates from a length it has not checked
// against the input. Its errors are of two classes — ErrMalformed (the bytes do not decode)
// and ErrUnsupported (a type a client may not send) — and say whether the address could be
// read: a frame whose address decoded is one document's error, anything else the socket's.
package hocuspocus

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nomicore/nomicore/lib0"
)

// Frame types: the varUint after the address.
const (
	TypeSync               = 0
	TypeAwareness          = 1
	TypeAuth               = 2
	TypeQueryAwareness     = 3
	TypeSyncReply          = 4
	TypeStateless          = 5
	TypeBroadcastStateless = 6
	TypeClose              = 7
	TypeSyncStatus         = 8
	TypePing               = 9
	TypePong               = 10
)

// Sync sub-types (y-protocols/sync).
const (
	SyncStep1  = 0
	SyncStep2  = 1
	SyncUpdate = 2
)

// Auth sub-types (@hocuspocus/common AuthMessageType).
const (
	AuthToken            = 0
	AuthPermissionDenied = 1
	AuthAuthenticated    = 2
)

// Scopes an Authenticated frame carries (the provider's AuthorizedScope).
const (
	ScopeReadWrite = "read-write"
	ScopeReadOnly  = "readonly"
)

// sessionSeparator splits a 4.x session address into the document name and the session.
const sessionSeparator = "\x00"

// MaxAddressBytes bounds an address: a namespace id and a provider's session id take well
// under 100 bytes; a longer address is malformed.
const MaxAddressBytes = 512

// The two classes of bad input.
var (
	// ErrMalformed: bytes that do not decode — truncated, trailing bytes, a number out of
	// range or not in its shortest form, a string that is not UTF-8, an address too long.
	ErrMalformed = errors.New("malformed frame")
	// ErrUnsupported: a type (or sub-type) a client does not send: SyncStatus, CLOSE with a
	// reason, BroadcastStateless, an auth answer, an unknown number.
	ErrUnsupported = errors.New("unsupported frame")
)

// FrameError is an error of ReadFrame: its class (Kind, ErrMalformed or ErrUnsupported),
// and the address when it decoded (HasAddress): the error is then that document's.
type FrameError struct {
	Kind       error
	HasAddress bool
	Address    string
	Detail     string
}

func (e *FrameError) Error() string {
	if e.HasAddress {
		return fmt.Sprintf("%v for document %q: %s", e.Kind, Document(e.Address), e.Detail)
	}
	return fmt.Sprintf("%v: %s", e.Kind, e.Detail)
}

func (e *FrameError) Unwrap() error { return e.Kind }

// Frame is one decoded client frame. Byte fields alias the input.
type Frame struct {
	// Ping and Pong are the one-byte frames without an address; the other fields are then
	// empty.
	Ping, Pong bool
	Address    string // as written: name, or name "\0" session
	Type       uint64
	// Sync is the sync sub-type (TypeSync, TypeSyncReply); Payload is its state vector or
	// update, or the awareness update (TypeAwareness).
	Sync    uint64
	Payload []byte
	// Token and Version are an auth Token frame's (Version empty before 4.x).
	Token, Version string
	// Stateless is a Stateless frame's payload.
	Stateless string
}

// Document returns the document name of an address (the part before a session id).
func Document(address string) string {
	name, _, _ := strings.Cut(address, sessionSeparator)
	return name
}

// Name is the frame's name in metrics and logs.
func (f Frame) Name() string {
	switch {
	case f.Ping:
		return "ping"
	case f.Pong:
		return "pong"
	}
	switch f.Type {
	case TypeSync, TypeSyncReply:
		switch f.Sync {
		case SyncStep1:
			return "sync-step1"
		case SyncStep2:
			return "sync-step2"
		}
		return "update"
	case TypeAwareness:
		return "awareness"
	case TypeAuth:
		return "auth"
	case TypeQueryAwareness:
		return "query-awareness"
	case TypeStateless:
		return "stateless"
	case TypeClose:
		return "close"
	}
	return "unsupported"
}

// ReadFrame decodes one client frame: exactly one frame, nothing after it (an auth Token
// frame may carry fields after the provider version that later providers add; they are
// ignored). Errors are *FrameError.
func ReadFrame(b []byte) (Frame, error) {
	if len(b) == 1 {
		switch b[0] {
		case TypePing:
			return Frame{Ping: true}, nil
		case TypePong:
			return Frame{Pong: true}, nil
		}
	}
	d := lib0.NewDecoder(b)
	addr := d.ReadVarStringBytes()
	if err := d.Err(); err != nil {
		return Frame{}, &FrameError{Kind: ErrMalformed, Detail: "address: " + err.Error()}
	}
	if len(addr) > MaxAddressBytes {
		return Frame{}, &FrameError{Kind: ErrMalformed, Detail: fmt.Sprintf("address of %d bytes (at most %d)", len(addr), MaxAddressBytes)}
	}
	f := Frame{Address: string(addr)}
	fail := func(kind error, detail string) (Frame, error) {
		return Frame{Address: f.Address}, &FrameError{Kind: kind, HasAddress: true, Address: f.Address, Detail: detail}
	}
	f.Type = d.ReadVarUint()
	if err := d.Err(); err != nil {
		return fail(ErrMalformed, "type: "+err.Error())
	}
	switch f.Type {
	case TypeSync, TypeSyncReply:
		f.Sync = d.ReadVarUint()
		if d.Err() == nil && f.Sync > SyncUpdate {
			return fail(ErrUnsupported, fmt.Sprintf("sync sub-type %d", f.Sync))
		}
		f.Payload = d.ReadVarUint8Array()
	case TypeAwareness:
		f.Payload = d.ReadVarUint8Array()
	case TypeAuth:
		sub := d.ReadVarUint()
		if d.Err() == nil && sub != AuthToken {
			return fail(ErrUnsupported, fmt.Sprintf("auth sub-type %d from a client", sub))
		}
		f.Token = d.ReadVarString()
		if d.Remaining() > 0 {
			f.Version = d.ReadVarString()
		}
		if err := d.Err(); err != nil {
			return fail(ErrMalformed, "auth: "+err.Error())
		}
		return f, nil
	case TypeQueryAwareness, TypeClose:
	case TypeStateless:
		f.Stateless = d.ReadVarString()
	default:
		return fail(ErrUnsupported, fmt.Sprintf("type %d from a client", f.Type))
	}
	if err := d.Finish(); err != nil {
		return fail(ErrMalformed, f.Name()+": "+err.Error())
	}
	return f, nil
}

// AppendAddressed appends a frame of address carrying msg, a y-protocols message (varUint
// type · payload, as the y-websocket protocol writes it: Sync, Awareness and QueryAwareness
// frames are such a message after the address).
func AppendAddressed(dst []byte, address string, msg []byte) []byte {
	dst = lib0.AppendVarString(dst, address)
	return append(dst, msg...)
}

// AppendSync appends a Sync frame of sub-type sync carrying payload.
func AppendSync(dst []byte, address string, sync uint64, payload []byte) []byte {
	dst = lib0.AppendVarString(dst, address)
	dst = lib0.AppendVarUint(dst, TypeSync)
	dst = lib0.AppendVarUint(dst, sync)
	return lib0.AppendVarUint8Array(dst, payload)
}

// AppendAwareness appends an Awareness frame carrying an encoded awareness update.
func AppendAwareness(dst []byte, address string, update []byte) []byte {
	dst = lib0.AppendVarString(dst, address)
	dst = lib0.AppendVarUint(dst, TypeAwareness)
	return lib0.AppendVarUint8Array(dst, update)
}

// AppendAuthenticated appends an Authenticated frame with scope (ScopeReadWrite or
// ScopeReadOnly).
func AppendAuthenticated(dst []byte, address, scope string) []byte {
	dst = lib0.AppendVarString(dst, address)
	dst = lib0.AppendVarUint(dst, TypeAuth)
	dst = lib0.AppendVarUint(dst, AuthAuthenticated)
	return lib0.AppendVarString(dst, scope)
}

// AppendPermissionDenied appends a PermissionDenied frame: the provider reports reason with
// onAuthenticationFailed.
func AppendPermissionDenied(dst []byte, address, reason string) []byte {
	dst = lib0.AppendVarString(dst, address)
	dst = lib0.AppendVarUint(dst, TypeAuth)
	dst = lib0.AppendVarUint(dst, AuthPermissionDenied)
	return lib0.AppendVarString(dst, reason)
}

// AppendTokenRequest appends an auth Token frame without a token: the provider answers with
// its current token (a refresh the server asks for).
func AppendTokenRequest(dst []byte, address string) []byte {
	dst = lib0.AppendVarString(dst, address)
	dst = lib0.AppendVarUint(dst, TypeAuth)
	return lib0.AppendVarUint(dst, AuthToken)
}

// AppendStateless appends a Stateless frame carrying payload.
func AppendStateless(dst []byte, address, payload string) []byte {
	dst = lib0.AppendVarString(dst, address)
	dst = lib0.AppendVarUint(dst, TypeStateless)
	return lib0.AppendVarString(dst, payload)
}

// AppendSyncStatus appends a SyncStatus frame: saved (1) decrements the provider's count of
// unsynced changes; not saved (0) leaves it.
func AppendSyncStatus(dst []byte, address string, saved bool) []byte {
	dst = lib0.AppendVarString(dst, address)
	dst = lib0.AppendVarUint(dst, TypeSyncStatus)
	if saved {
		return lib0.AppendVarUint(dst, 1)
	}
	return lib0.AppendVarUint(dst, 0)
}

// AppendClose appends a CLOSE frame: the server closed the document (the socket stays); the
// provider reports reason with onClose.
func AppendClose(dst []byte, address, reason string) []byte {
	dst = lib0.AppendVarString(dst, address)
	dst = lib0.AppendVarUint(dst, TypeClose)
	return lib0.AppendVarString(dst, reason)
}

// Ping and Pong are the one-byte frames without an address.
var (
	Ping = []byte{TypePing}
	Pong = []byte{TypePong}
)
