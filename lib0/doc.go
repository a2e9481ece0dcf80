// Package lib0 implements the lib0 v1 binary encoding that the NMCR wire contract (§4) and the
// Yjs update format use: canonical writers that produce exactly the bytes of the JavaScript
// lib0 package, and strict, bounded readers.
//
// The readers never panic and never allocate from a length they have not checked against the
// remaining input. They reject truncation, integers beyond the JS safe range (2^53−1),
// variable-length integers not in their shortest form, invalid UTF-8, bool and optional bytes
// other than 0 and 1, and unknown tags of the any encoding. Rejecting non-shortest integers
// and invalid UTF-8 is stricter than JavaScript lib0, which accepts both; no conforming writer
// produces them.
package lib0
