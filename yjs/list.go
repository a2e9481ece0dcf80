package yjs

import (
	"fmt"

	"github.com/nomicore/nomicore/lib0"
)

// piece is one item to create for inserted values: a run of any values, or one content.
type piece struct {
	anys []any
	c    content
}

// piecesOf converts application values into contents for a sequence of owner (JS
// typeListInsertGenericsAfter): consecutive plain values share one ContentAny; []byte is a
// ContentBinary; a *Doc a subdocument; a preliminary type a nested type. Nothing is changed
// when a value is unsupported.
func piecesOf(owner *Type, values []any) ([]piece, error) {
	var out []piece
	var run []any
	seen := map[any]bool{owner: true}
	flush := func() {
		if len(run) > 0 {
			out = append(out, piece{anys: run})
			run = nil
		}
	}
	for _, v := range values {
		c, plain, err := contentOf(v, seen)
		if err != nil {
			return nil, err
		}
		if c == nil {
			run = append(run, plain)
			continue
		}
		flush()
		out = append(out, piece{c: c})
	}
	flush()
	return out, nil
}

// contentOf returns the content for a non-plain value, or the normalized plain value.
// seen holds the types and subdocuments already placed by the same change (and the type
// receiving the value): each can be placed once, and a type cannot hold itself. A
// preliminary type is accepted only if everything it holds is (prelim.check): its content
// is replayed when it is integrated, and that must not fail half way.
func contentOf(v any, seen map[any]bool) (content, any, error) {
	switch x := v.(type) {
	case []byte:
		return &contentBinary{b: append([]byte(nil), x...)}, nil, nil
	case *Doc:
		if x.item != nil || seen[x] {
			return nil, nil, ErrAlreadyIntegrated
		}
		seen[x] = true
		return &contentDoc{doc: x}, nil, nil
	}
	if t := typeOf(v); t != nil {
		if t.doc != nil || t.item != nil || t.prelim == nil || seen[t] {
			return nil, nil, ErrAlreadyIntegrated
		}
		seen[t] = true
		if err := t.prelim.check(seen); err != nil {
			return nil, nil, err
		}
		return &contentType{t: t}, nil, nil
	}
	n, err := normalizeAny(v)
	return nil, n, err
}

// normalizeAny converts a Go value into the lib0 any model as a remote reader would see it.
func normalizeAny(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string, float64, lib0.Undefined, lib0.BigInt:
		return v, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint32:
		return float64(x), nil
	case int32:
		return float64(x), nil
	}
	e := lib0.NewEncoder(32)
	if err := e.WriteAny(v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedValue, err)
	}
	d := lib0.NewDecoder(e.Bytes())
	out := d.ReadAny()
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedValue, err)
	}
	return out, nil
}

// insertPiecesAfter creates items for pieces after left (before right) in t.
func (tx *Transaction) insertPiecesAfter(t *Type, left, right *item, pieces []piece) {
	for _, p := range pieces {
		c := p.c
		if c == nil {
			c = &contentAny{vals: p.anys}
		}
		left = tx.insertItem(left, right, t, "", false, c)
	}
}

func piecesLen(pieces []piece) int {
	n := 0
	for _, p := range pieces {
		if p.c == nil {
			n += len(p.anys)
		} else {
			n++
		}
	}
	return n
}

// withOwner runs fn with t as the marker owner (its markers are kept exact by fn).
func (tx *Transaction) withOwner(t *Type, fn func()) {
	prev := tx.markerOwner
	tx.markerOwner = t
	fn()
	tx.markerOwner = prev
}

// listInsert inserts values at index (JS typeListInsertGenerics): after the visible unit
// at index-1.
func (t *Type) listInsert(tx *Transaction, index int, values []any) error {
	if index < 0 || index > t.length {
		return ErrIndexOutOfRange
	}
	pieces, err := piecesOf(t, values)
	if err != nil {
		return err
	}
	tx.withOwner(t, func() {
		var left *item
		if index > 0 {
			it, s := t.seek(index - 1)
			if end := s + int(it.len()); index < end {
				tx.doc.store.itemCleanStart(tx, ID{it.client(), it.clock() + uint64(index-s)})
			}
			left = it
		}
		right := t.start
		if left != nil {
			right = left.right
		}
		tx.insertPiecesAfter(t, left, right, pieces)
		t.markersInserted(index, piecesLen(pieces))
	})
	return nil
}

// listPush appends values after the last item of the sequence (JS typeListPushGenerics).
func (t *Type) listPush(tx *Transaction, values []any) error {
	pieces, err := piecesOf(t, values)
	if err != nil {
		return err
	}
	tx.withOwner(t, func() {
		n := t.start
		best := -1
		for i, m := range t.markers {
			if best < 0 || m.index > t.markers[best].index {
				best = i
			}
		}
		if best >= 0 {
			n = t.markers[best].item
		}
		if n != nil {
			for n.right != nil {
				n = n.right
			}
		}
		tx.insertPiecesAfter(t, n, nil, pieces)
	})
	return nil
}

// listDelete deletes length units from index (JS typeListDelete).
func (t *Type) listDelete(tx *Transaction, index, length int) error {
	if length == 0 {
		return nil
	}
	if index < 0 || length < 0 || index+length > t.length {
		return ErrIndexOutOfRange
	}
	tx.withOwner(t, func() {
		store := &tx.doc.store
		n, s := t.seek(index)
		if s < index {
			n = store.itemCleanStart(tx, ID{n.client(), n.clock() + uint64(index-s)})
		}
		remaining := length
		for remaining > 0 && n != nil {
			if !n.deleted() {
				if remaining < int(n.len()) {
					store.itemCleanStart(tx, ID{n.client(), n.clock() + uint64(remaining)})
				}
				n.delete(tx)
				remaining -= int(n.len())
			}
			n = n.right
		}
		t.markersDeleted(index, length)
	})
	return nil
}

// listGet returns the value at index.
func (t *Type) listGet(index int) (any, bool) {
	if index < 0 || index >= t.length {
		return nil, false
	}
	it, s := t.seek(index)
	vals := it.values(nil)
	return vals[index-s], true
}

// listSlice returns the visible values from start (inclusive) to end (exclusive), clamped
// to the sequence.
func (t *Type) listSlice(start, end int) []any {
	if start < 0 {
		start = 0
	}
	if end > t.length {
		end = t.length
	}
	if start >= end {
		return []any{}
	}
	out := make([]any, 0, end-start)
	it, s := t.seek(start)
	for ; it != nil && s < end; it = it.right {
		if !it.visible() {
			continue
		}
		vals := it.values(nil)
		lo, hi := 0, len(vals)
		if start > s {
			lo = start - s
		}
		if end < s+len(vals) {
			hi = end - s
		}
		out = append(out, vals[lo:hi]...)
		s += len(vals)
	}
	return out
}

// listAll returns every visible value.
func (t *Type) listAll() []any {
	var out []any
	for it := t.start; it != nil; it = it.right {
		if it.visible() {
			out = it.values(out)
		}
	}
	if out == nil {
		out = []any{}
	}
	return out
}

// mapSet sets key to value (JS typeMapSet).
func (t *Type) mapSet(tx *Transaction, key string, value any) error {
	c, plain, err := contentOf(value, map[any]bool{t: true})
	if err != nil {
		return err
	}
	if c == nil {
		c = &contentAny{vals: []any{plain}}
	}
	left := t.entries[key]
	tx.insertItem(left, nil, t, key, true, c)
	return nil
}

// mapDelete deletes key.
func (t *Type) mapDelete(tx *Transaction, key string) {
	if it := t.entries[key]; it != nil {
		it.delete(tx)
	}
}

// mapGet returns the value of key.
func (t *Type) mapGet(key string) (any, bool) {
	it := t.entries[key]
	if it == nil || it.deleted() {
		return nil, false
	}
	vals := it.values(nil)
	return vals[len(vals)-1], true
}

// mapKeys returns the keys with a value, sorted.
func (t *Type) mapKeys() []string {
	keys := make([]string, 0, len(t.entries))
	for _, k := range t.sortedKeys() {
		if !t.entries[k].deleted() {
			keys = append(keys, k)
		}
	}
	return keys
}
