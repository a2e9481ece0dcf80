package yjs

import (
	"sync/atomic"

	"github.com/nomicore/nomicore/lib0"
)

// Shared is an update on its way to several receivers, each of which may merge it with
// others before sending it on — a hub relays each peer's update to every other peer, and
// merges what waits for a receiver into one message. What a merge reads of the update is
// read by the first merge and kept for the others (MergeShared), so relaying to n receivers
// reads it once, not n times. The bytes must not change once shared. Safe for concurrent
// use: merges on several goroutines may read one Shared.
type Shared struct {
	bytes []byte
	// layout is the first merge's reading (readSplice), immutable once stored; nil until a
	// merge needs it. Two merges reading it at once both store the same reading.
	layout atomic.Pointer[spliceLayout]
}

// Share makes update a Shared; the caller gives up changing it.
func Share(update []byte) *Shared { return &Shared{bytes: update} }

// Bytes returns the update. It must not be modified.
func (s *Shared) Bytes() []byte { return s.bytes }

// splice returns the update's reading for spliceMerge, reading it the first time.
func (s *Shared) splice() *spliceLayout {
	if l := s.layout.Load(); l != nil {
		return l
	}
	var d lib0.Decoder
	var seen [8]uint64
	blocks, deletes, ok := readSplice(s.bytes, nil, &d, &seen)
	if !ok {
		blocks = nil // what was read before the refusal is of no use
	}
	l := &spliceLayout{blocks: blocks, deletes: deletes, ok: ok}
	s.layout.Store(l)
	return l
}

// MergeShared is MergeUpdates(updates), reusing what earlier merges read of the shared
// ones: shared, if not nil, has one entry per update, the update's Shared (whose Bytes are
// that update) or nil. The bytes are MergeUpdates's.
func MergeShared(updates [][]byte, shared []*Shared) ([]byte, error) {
	if len(updates) == 1 {
		if err := validateUpdate(updates[0], true); err != nil {
			return nil, err
		}
		return append([]byte(nil), updates[0]...), nil
	}
	if out, ok := spliceMerge(updates, shared); ok {
		return out, nil
	}
	return mergeInFull(updates)
}
