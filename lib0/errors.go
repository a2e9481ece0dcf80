package lib0

import (
	"errors"
	"fmt"
)

// Kinds of decoding failure. A Decoder reports them wrapped in an *Error that carries the
// byte offset; test with errors.Is.
var (
	// ErrTruncated: the input ended inside a value.
	ErrTruncated = errors.New("unexpected end of input")
	// ErrOverflow: an integer is beyond its range (a varUint beyond 2^53−1, the JS safe
	// integer range, or beyond the narrower range the caller asked for).
	ErrOverflow = errors.New("integer out of range")
	// ErrNonCanonical: a variable-length integer is not in its shortest form.
	ErrNonCanonical = errors.New("non-canonical variable-length integer")
	// ErrInvalidUTF8: a string is not valid UTF-8.
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrLength: a declared length exceeds the remaining input.
	ErrLength = errors.New("declared length exceeds remaining input")
	// ErrBool: a bool byte is neither 0 nor 1.
	ErrBool = errors.New("bool byte is not 0 or 1")
	// ErrOptional: an optional marker byte is neither 0 nor 1.
	ErrOptional = errors.New("optional marker is not 0 or 1")
	// ErrAnyTag: an unknown type tag in the lib0 any encoding.
	ErrAnyTag = errors.New("unknown any type tag")
	// ErrTooDeep: lib0 any values nested deeper than MaxAnyDepth.
	ErrTooDeep = errors.New("any value nested too deeply")
	// ErrTrailing: bytes remain after the last value.
	ErrTrailing = errors.New("trailing bytes")
	// ErrCount: a list count is over its cap.
	ErrCount = errors.New("list count over its cap")
)

// Error is a decoding failure: its Kind (one of the Err* values above, or a caller's own
// error passed to Decoder.Fail) and the input offset at which it was detected.
type Error struct {
	Kind   error
	Offset int
}

func (e *Error) Error() string { return fmt.Sprintf("lib0: %v at offset %d", e.Kind, e.Offset) }

// Unwrap returns the kind, so errors.Is(err, lib0.ErrTruncated) works.
func (e *Error) Unwrap() error { return e.Kind }
