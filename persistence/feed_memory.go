package persistence

import (
	"slices"
	"sort"
	"time"
)

// memFeed is the change feed and the versions of a MemoryStore. Guarded by memBackend.mu.
type memFeed struct {
	changes   []Change // oldest first
	changeSeq uint64   // the newest cursor ever given
	latest    map[string]Change
	versions  map[string]*memVersions
}

type memVersions struct {
	seq  uint64
	list []memVersion // by id
}

type memVersion struct {
	v     Version
	state []byte
}

func (m *memBackend) feedState() *memFeed { return m.feed }

func cloneChange(c Change) Change {
	c.StateVector = clone(c.StateVector)
	return c
}

// ---- reader ----

func (m *memBackend) changeBounds() (ChangeBounds, error) {
	f := m.feedState()
	b := ChangeBounds{Head: f.changeSeq, PrunedThrough: f.changeSeq}
	if len(f.changes) > 0 {
		b.PrunedThrough = f.changes[0].Cursor - 1
	}
	return b, nil
}

func (m *memBackend) changes(after uint64, limit int) ([]Change, error) {
	f := m.feedState()
	i := sort.Search(len(f.changes), func(i int) bool { return f.changes[i].Cursor > after })
	var out []Change
	for ; i < len(f.changes) && len(out) < limit; i++ {
		out = append(out, cloneChange(f.changes[i]))
	}
	return out, nil
}

func (m *memBackend) latestChanges(fn func(Change) error) error {
	f := m.feedState()
	ids := make([]string, 0, len(f.latest))
	for id := range f.latest {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := fn(cloneChange(f.latest[id])); err != nil {
			return err
		}
	}
	return nil
}

func (m *memBackend) versions(ns string) ([]Version, error) {
	vs := m.feedState().versions[ns]
	if vs == nil {
		return nil, nil
	}
	out := make([]Version, 0, len(vs.list))
	for _, mv := range vs.list {
		v := mv.v
		v.StateVector = clone(v.StateVector)
		out = append(out, v)
	}
	return out, nil
}

func (m *memBackend) version(ns string, id uint64) (Version, []byte, error) {
	vs := m.feedState().versions[ns]
	if vs == nil {
		return Version{}, nil, ErrNotFound
	}
	for _, mv := range vs.list {
		if mv.v.ID == id {
			v := mv.v
			v.StateVector = clone(v.StateVector)
			return v, clone(mv.state), nil
		}
	}
	return Version{}, nil, ErrNotFound
}

// ---- writer ----

func (m *memBackend) putChange(c Change) (uint64, error) {
	f := m.feedState()
	oldSeq, n := f.changeSeq, len(f.changes)
	oldLatest, had := f.latest[c.NamespaceID]
	m.undo = append(m.undo, func() {
		f.changeSeq, f.changes = oldSeq, f.changes[:n]
		if had {
			f.latest[c.NamespaceID] = oldLatest
		} else {
			delete(f.latest, c.NamespaceID)
		}
	})
	f.changeSeq++
	c = cloneChange(c)
	c.Cursor = f.changeSeq
	f.changes = append(f.changes, c)
	f.latest[c.NamespaceID] = c
	return c.Cursor, nil
}

func (m *memBackend) pruneChanges(before time.Time, keep, limit int) error {
	f := m.feedState()
	drop := 0
	for drop < len(f.changes) && drop < limit {
		c := f.changes[drop]
		kept := f.changeSeq - c.Cursor + 1
		if (keep >= 0 && kept > uint64(keep)) || (!before.IsZero() && c.At.Before(before)) {
			drop++
			continue
		}
		break
	}
	if drop > 0 {
		old := f.changes
		m.undo = append(m.undo, func() { f.changes = old })
		f.changes = slices.Clone(f.changes[drop:])
	}
	return nil
}

func (m *memBackend) putVersion(v Version, state []byte) (uint64, error) {
	f := m.feedState()
	vs := f.versions[v.NamespaceID]
	if vs == nil {
		vs = &memVersions{}
		f.versions[v.NamespaceID] = vs
		m.undo = append(m.undo, func() { delete(f.versions, v.NamespaceID) })
	}
	oldSeq, oldList := vs.seq, vs.list
	m.undo = append(m.undo, func() { vs.seq, vs.list = oldSeq, oldList })
	vs.seq++
	v.ID = vs.seq
	v.StateVector = clone(v.StateVector)
	vs.list = append(slices.Clip(vs.list), memVersion{v: v, state: clone(state)})
	return v.ID, nil
}

func (m *memBackend) deleteVersion(ns string, id uint64) error {
	vs := m.feedState().versions[ns]
	if vs == nil {
		return nil
	}
	old := vs.list
	m.undo = append(m.undo, func() { vs.list = old })
	vs.list = slices.DeleteFunc(slices.Clone(vs.list), func(mv memVersion) bool { return mv.v.ID == id })
	return nil
}

func (m *memBackend) deleteVersions(ns string) error {
	f := m.feedState()
	vs, had := f.versions[ns]
	if !had {
		return nil
	}
	m.undo = append(m.undo, func() { f.versions[ns] = vs })
	delete(f.versions, ns)
	return nil
}
