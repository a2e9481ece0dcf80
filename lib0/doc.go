// Package lib0 reads and writes the lib0 v1 binary encoding: the compact format of the
// JavaScript lib0 package, which Yjs updates and state vectors are made of and which the
// replication wire format (docs/protocol.md#payload-encoding) uses for its message payloads.
// Everything that crosses the wire or lands in a store as bytes goes through this package.
//
// # Writing
//
// An Encoder appends values to a growing buffer (WriteVarUint, WriteVarString,
// WriteVarUint8Array, WriteAny, …); Bytes returns the result. The Append* functions do the
// same for a caller's slice. Every writer emits the canonical (shortest) form, so the bytes
// equal those of JavaScript lib0 for the same values, which the golden vectors under
// testdata check.
//
// # Reading
//
// A Decoder reads from a byte slice. Its errors are sticky: after the first failure every
// read returns a zero value, so a caller reads a whole structure and then checks Err (or
// Finish, which also refuses trailing bytes) once. A failure is an *Error holding the byte
// offset and one of the Err* kinds (ErrTruncated, ErrOverflow, ErrNonCanonical, …); test
// with errors.Is. Callers add their own grammar rules with Decoder.Fail, so one error path
// covers both.
//
// Readers are built for hostile input: they never panic and never allocate from a length
// they have not checked against the remaining input. They reject truncation, integers
// beyond the JS safe range (2^53−1), variable-length integers not in their shortest form,
// invalid UTF-8, bool and optional bytes other than 0 and 1, unknown tags of the any
// encoding and any values nested deeper than MaxAnyDepth. Rejecting non-shortest integers
// and invalid UTF-8 is stricter than JavaScript lib0, which accepts both; no conforming
// writer produces them.
//
// # JavaScript values
//
// The "any" encoding carries JavaScript values. ReadAny returns them as nil (null),
// Undefined, bool, float64, BigInt, string, []byte (Uint8Array), []any and Object (a plain
// object keeping JS property order); WriteAny also accepts Go integers, other slices and
// string-keyed maps (see any.go).
//
// # Concurrency
//
// An Encoder or Decoder belongs to one goroutine. Slices a Decoder returns from ReadRaw,
// ReadVarUint8Array and ReadVarStringBytes alias its input, and Encoder.Bytes aliases the
// encoder's buffer until the next write. The package keeps no global state.
package lib0
