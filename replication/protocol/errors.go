package protocol

import (
	"fmt"
	"strings"
)

// Error is a classified protocol failure: a frame that failed a decoding check, a chunk that
// broke a transfer rule, a failed handshake, or an exhausted sequence. Every failure this
// package reports is an *Error; use errors.As.
//
// Scope says what the caller must do (docs/protocol.md#errors): a connection-scope error
// closes the connection (with CloseCode, after a best-effort connection ERROR frame); a
// namespace-scope error fails only that namespace (a namespace ERROR frame), and the
// connection goes on.
type Error struct {
	Code  ErrorCode
	Scope Scope
	// Namespace is the frame's namespaceId for a namespace-scope error (it is always readable
	// then); zero otherwise.
	Namespace NamespaceID
	// Type and Sequence come from the frame's envelope when it was readable (HasHeader), so
	// the caller can answer with relatedSequence.
	Type      MessageType
	Sequence  uint32
	HasHeader bool
	// Detail names the violated rule, for local logs only: never put it on the wire.
	Detail string
	// Err is the underlying cause (for example a *lib0.Error), or nil.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("nmcr: ")
	b.WriteString(string(e.Code))
	if e.Scope == ScopeNamespace {
		fmt.Fprintf(&b, " (namespace %s)", e.Namespace)
	}
	if e.HasHeader {
		fmt.Fprintf(&b, " in %v #%d", e.Type, e.Sequence)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Spec returns the registry row of the error's code and scope. Internal codes such as
// OUTBOUND_SEQUENCE_EXHAUSTED have none.
func (e *Error) Spec() (ErrorSpec, bool) { return LookupError(e.Scope, e.Code) }

// CloseCode is the WebSocket close code for a connection-scope error
// (docs/protocol.md#close-codes); internal codes without a registry row close with 1011.
func (e *Error) CloseCode() CloseCode {
	if s, ok := e.Spec(); ok && s.Close != 0 {
		return s.Close
	}
	return CloseInternal
}

func connErr(code ErrorCode, detail string) *Error {
	return &Error{Code: code, Scope: ScopeConnection, Detail: detail}
}

func nsErr(code ErrorCode, ns NamespaceID, detail string) *Error {
	return &Error{Code: code, Scope: ScopeNamespace, Namespace: ns, Detail: detail}
}

func (e *Error) withHeader(h Header) *Error {
	e.Type, e.Sequence, e.HasHeader = h.Type, h.Sequence, true
	return e
}
