package yjs

// Search markers make index lookups in long sequences cheap (the role of JS search
// markers): a marker remembers a visible item and the index it starts at, and a lookup walks
// from the nearest marker instead of from the start.
//
// Invariant: a marker's item is a visible (countable, not deleted) item of the type's
// sequence and index is the number of visible units before it. Local sequence operations
// keep markers exact (they run with tx.markerOwner set to the type); any other change to a
// type's sequence clears its markers; a deleted marked item drops its marker; a marked item
// merged into its left neighbour moves the marker there.

const maxMarkers = 16

type marker struct {
	item  *item
	index int
	used  uint64 // last use, for replacement
}

func (t *Type) clearMarkers() {
	for _, m := range t.markers {
		m.item.flags &^= flagMarker
	}
	clear(t.markers)
	t.markers = t.markers[:0]
}

func (t *Type) dropMarker(it *item) {
	it.flags &^= flagMarker
	for i, m := range t.markers {
		if m.item == it {
			last := len(t.markers) - 1
			t.markers[i] = t.markers[last]
			t.markers[last] = marker{}
			t.markers = t.markers[:last]
			return
		}
	}
}

// markerMerged moves the marker of right onto left, which absorbs right.
func (t *Type) markerMerged(left, right *item) {
	if left.marked() {
		t.dropMarker(right)
		return
	}
	for i := range t.markers {
		if t.markers[i].item == right {
			t.markers[i].item = left
			t.markers[i].index -= int(left.len())
			left.flags |= flagMarker
			right.flags &^= flagMarker
			return
		}
	}
}

// markersInserted shifts the markers at or after index by n (n units inserted at index).
func (t *Type) markersInserted(index, n int) {
	for i := range t.markers {
		if t.markers[i].index >= index {
			t.markers[i].index += n
		}
	}
}

// markersDeleted shifts the markers after the deleted range [index, index+n).
func (t *Type) markersDeleted(index, n int) {
	for i := range t.markers {
		if t.markers[i].index >= index+n {
			t.markers[i].index -= n
		}
	}
}

// seek returns the visible item containing sequence index (0 <= index < t.length) and the
// index it starts at, walking from the nearest marker, and records a marker there.
func (t *Type) seek(index int) (*item, int) {
	it, s := t.start, 0
	best := -1
	dist := index
	for i, m := range t.markers {
		if d := abs(m.index - index); d < dist {
			best, dist = i, d
		}
	}
	if best >= 0 {
		it, s = t.markers[best].item, t.markers[best].index
	}
	if index >= s {
		for it != nil {
			if it.visible() {
				if index < s+int(it.len()) {
					break
				}
				s += int(it.len())
			}
			it = it.right
		}
	} else {
		for {
			if it = it.left; it == nil {
				break
			}
			if it.visible() {
				s -= int(it.len())
				if index >= s {
					break
				}
			}
		}
	}
	if it == nil {
		return nil, s
	}
	t.mark(it, s, best)
	return it, s
}

// mark records a marker at it (starting at index s), reusing the marker used for the
// lookup (best) when the cursor moved only a little.
func (t *Type) mark(it *item, s int, best int) {
	t.markerTick++
	if it.marked() {
		for i := range t.markers {
			if t.markers[i].item == it {
				t.markers[i].used = t.markerTick
				return
			}
		}
	}
	var m *marker
	switch {
	case best >= 0 && abs(t.markers[best].index-s) < t.length/maxMarkers+1:
		m = &t.markers[best]
	case len(t.markers) < maxMarkers:
		t.markers = append(t.markers, marker{})
		m = &t.markers[len(t.markers)-1]
	default:
		m = &t.markers[0]
		for i := range t.markers {
			if t.markers[i].used < m.used {
				m = &t.markers[i]
			}
		}
	}
	if m.item != nil {
		m.item.flags &^= flagMarker
	}
	*m = marker{item: it, index: s, used: t.markerTick}
	it.flags |= flagMarker
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
