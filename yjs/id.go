package yjs

import (
	"cmp"
	"math"
	"slices"

	"github.com/nomicore/nomicore/lib0"
)

// ID names one unit of content: the client that created it and that client's logical clock
// at the time. Clocks of one client count its content units from 0 without gaps.
type ID struct {
	Client uint64
	Clock  uint64
}

// maxClock bounds clocks and lengths: JS numbers are exact up to 2^53−1.
const maxClock = lib0.MaxSafeInteger

// StateVector maps each client to the number of its content units known (its next clock).
type StateVector map[uint64]uint64

// EncodeStateVector writes sv in the v1 format: a count, then (client, clock) pairs with
// the higher client ids first (the order JS yjs writes).
func EncodeStateVector(sv StateVector) []byte {
	states := make([]clientClock, 0, len(sv))
	for c, clock := range sv {
		states = append(states, clientClock{c, clock})
	}
	return encodeStateVector(states)
}

// encodeStateVector returns the v1 encoding of states, highest client first, as every
// writer orders them (it sorts states in place).
func encodeStateVector(states []clientClock) []byte {
	slices.SortFunc(states, func(a, b clientClock) int { return cmp.Compare(b.client, a.client) })
	buf := make([]byte, 0, 1+len(states)*12)
	buf = lib0.AppendVarUint(buf, uint64(len(states)))
	for _, s := range states {
		buf = lib0.AppendVarUint(buf, s.client)
		buf = lib0.AppendVarUint(buf, s.clock)
	}
	return buf
}

// DecodeStateVector reads a v1 state vector. A client listed twice keeps its last clock (as
// in JS). Trailing bytes are an error.
func DecodeStateVector(b []byte) (StateVector, error) {
	d := lib0.NewDecoder(b)
	sv := readStateVector(d)
	if err := d.Finish(); err != nil {
		return nil, decodeErr("state vector", err)
	}
	return sv, nil
}

func readStateVector(d *lib0.Decoder) StateVector {
	n := d.ReadCount(math.MaxInt32, 2)
	sv := make(StateVector, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		client := d.ReadVarUint()
		clock := d.ReadVarUint()
		if d.Err() == nil {
			sv[client] = clock
		}
	}
	return sv
}

// decodeErr wraps a decoder failure into a *DecodeError.
func decodeErr(what string, err error) error {
	de := &DecodeError{What: what, Err: err}
	if le, ok := err.(*lib0.Error); ok {
		de.Offset = le.Offset
	}
	return de
}
