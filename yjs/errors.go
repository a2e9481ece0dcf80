package yjs

import (
	"errors"
	"fmt"
)

// DecodeError reports bytes that are not a well-formed update (v1 or v2) or state vector
// (malformed, truncated or hostile). Nothing was applied when it is returned. Callers map it
// to a "bad input" answer (APPLY_FAILED).
type DecodeError struct {
	What   string // what was being decoded: "update", "update v2", "state vector", …
	Offset int    // byte offset at which the problem was detected
	Err    error  // the cause: a *lib0.Error or one of the Err* values of this package
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("yjs: malformed %s at offset %d: %v", e.What, e.Offset, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// InternalError reports a broken invariant of the document model found while applying a
// change: a bug, not bad input. The document must be discarded (rebuilt from storage).
// Callers map it to INTERNAL_ERROR.
type InternalError struct {
	Op    string // the operation that failed
	Cause any    // the recovered panic value
}

func (e *InternalError) Error() string {
	return fmt.Sprintf("yjs: internal error in %s: %v", e.Op, e.Cause)
}

// Grammar violations of the update format, wrapped in a *DecodeError.
var (
	ErrContentRef      = errors.New("unknown struct or content ref in info byte")
	ErrTypeRef         = errors.New("unknown type ref")
	ErrParentInfo      = errors.New("parent info is neither 0 nor 1")
	ErrZeroLength      = errors.New("zero-length struct or delete range")
	ErrClockRange      = errors.New("clock beyond 2^53-1")
	ErrSelfReference   = errors.New("struct references its own client at or after its own clock")
	ErrJSON            = errors.New("invalid JSON content")
	ErrDocOptions      = errors.New("subdocument options are null or undefined")
	ErrDuplicateClient = errors.New("a client is listed twice in the struct section")
	ErrClientOrder     = errors.New("clients of the struct section are not in descending order")
)

// Errors of the application API.
var (
	// ErrIndexOutOfRange: an index or length beyond the sequence.
	ErrIndexOutOfRange = errors.New("yjs: index out of range")
	// ErrNotIntegrated: the type is preliminary (not yet part of a document) or was deleted.
	ErrNotIntegrated = errors.New("yjs: type is not part of a document")
	// ErrUnsupportedValue: a value with no Yjs representation.
	ErrUnsupportedValue = errors.New("yjs: unsupported value")
	// ErrKindMismatch: a root already has another concrete type.
	ErrKindMismatch = errors.New("yjs: root already defined with another type")
	// ErrAlreadyIntegrated: a preliminary type or subdocument that is already in a
	// document, or that a change would place twice (or inside itself).
	ErrAlreadyIntegrated = errors.New("yjs: value is already part of a document")
)
