package yjs

import "fmt"

// ReplayAsOlderVersions applies v1 updates in order, each in a transaction of its own, to a
// fresh document with GC on (what a hub or peer loads) the way versions of this package
// before the struct-list fix applied them. Those versions walked the structs of a remote
// deletion's range on from a list position kept across the split of the range's last struct;
// when that split also split a full chunk of the struct list (more than 512 structs of one
// client), the position was stale and the walk deleted live structs that lay between the
// middle of the chunk and the range. Formatting cleanup walked its ranges the same way.
//
// It exists so that an operator can tell whether a hub or peer of such a version served a
// damaged document: nmcr store check compares its result with a correct replay of the same
// stored updates. The document it returns is wrong on purpose; read it, never pass it on.
func ReplayAsOlderVersions(updates [][]byte) (*Doc, error) {
	d := NewDoc()
	d.olderDeleteWalk = true
	for i, u := range updates {
		if err := ApplyUpdate(d, u, nil); err != nil {
			return nil, fmt.Errorf("update %d: %w", i+1, err)
		}
	}
	return d, nil
}

// iterateStructsAsOlderVersions is iterateStructs as versions before the struct-list fix
// had it: the walk goes on from the position of the struct split at end, which the split may
// have moved (ReplayAsOlderVersions).
func (d *Doc) iterateStructsAsOlderVersions(tx *Transaction, l *structList, clock, end uint64, f func(*item)) {
	p := d.store.cleanStart(tx, l, clock)
	for {
		it := l.at(p)
		if end < it.endClock() {
			d.store.cleanStart(tx, l, end)
		}
		f(it)
		np, ok := l.next(p)
		if !ok || l.at(np).clock() >= end {
			return
		}
		p = np
	}
}
