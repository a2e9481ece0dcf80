package yjs

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// RestoreUpdate returns the update that makes a document whose state is current hold what
// the document whose state is version held, as a new change by a new client: it deletes
// what is visible now and was not then, and inserts again, as new items, what was visible
// then and is not now (deleted since, or never known to current). What is visible in both
// is left as it is, so that editors' positions in unchanged content survive the change and
// concurrent edits merge with it like with any other. The roots named in skipRoots are
// left untouched (a namespace's protected meta root). It returns nil when current already
// holds exactly what version held.
//
// version must be a whole state (EncodeStateAsUpdate), kept by whoever took the version:
// a live document garbage-collects the content of what is deleted, so content deleted since
// the version can only come from the version's own state. The comparison is by struct
// identity: an item visible in both is the same change. Formatting marks of a text are
// items like its characters, so the text's formatting comes back with it.
func RestoreUpdate(current, version []byte, skipRoots ...string) ([]byte, error) {
	d := NewDoc()
	if err := ApplyUpdate(d, current, nil); err != nil {
		return nil, fmt.Errorf("the current state: %w", err)
	}
	v := NewDoc(WithGC(false))
	if err := ApplyUpdate(v, version, nil); err != nil {
		return nil, fmt.Errorf("the version's state: %w", err)
	}
	var out []byte
	unsubscribe := d.OnUpdate(func(u []byte, _ any) {
		if out == nil {
			out = bytes.Clone(u)
		}
	})
	defer unsubscribe()
	names := map[string]bool{}
	for _, n := range d.RootNames() {
		names[n] = true
	}
	for _, n := range v.RootNames() {
		names[n] = true
	}
	for _, n := range skipRoots {
		delete(names, n)
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	same := true
	for _, n := range sorted {
		if contentKey(d.root(n)) != contentKey(v.root(n)) {
			same = false
			break
		}
	}
	if same {
		// Equal content made by other items (an earlier restore of the same version
		// inserted copies): nothing to change.
		return nil, nil
	}
	d.Transact(restoreOrigin{}, func(tx *Transaction) {
		r := &restorer{tx: tx, d: d, v: v}
		for _, n := range sorted {
			r.jobs = append(r.jobs, restoreJob{d: d.root(n), v: v.root(n)})
		}
		r.run()
	})
	return out, nil
}

// restoreOrigin is the origin of the transaction RestoreUpdate makes.
type restoreOrigin struct{}

// restoreJob makes the type d (of the document being changed) hold what v (of the
// version) holds: fill says d is new and empty, else d is v's own type, kept.
type restoreJob struct {
	d, v *Type
	fill bool
}

// restorer runs the jobs of one RestoreUpdate in one transaction. Nested types are jobs of
// their own, queued, so nesting depth costs no stack.
type restorer struct {
	tx   *Transaction
	d, v *Doc
	jobs []restoreJob
}

func (r *restorer) run() {
	for i := 0; i < len(r.jobs); i++ {
		j := r.jobs[i]
		r.jobs[i] = restoreJob{}
		j.d.clearMarkers() // items are placed by their neighbours here, not by index
		if j.fill {
			r.fill(j.d, j.v)
		} else {
			r.restore(j.d, j.v)
		}
	}
}

// fill copies every visible item of v into the new type d.
func (r *restorer) fill(d, v *Type) {
	var left *item
	for vi := v.start; vi != nil; vi = vi.right {
		if !vi.deleted() {
			left = r.insertCopy(d, left, vi, 0, vi.len())
		}
	}
	for _, key := range v.sortedKeys() {
		if vi := v.entries[key]; !vi.deleted() {
			r.setCopy(d, key, vi)
		}
	}
}

// restore makes d, a type the current document shares with the version, hold what v holds.
func (r *restorer) restore(d, v *Type) {
	store := &r.d.store
	// What is visible now and not in the version goes. Collected first: deleting splits
	// items, which relinks the sequence being walked.
	type span struct{ client, clock, end uint64 }
	var gone []span
	for it := d.start; it != nil; it = it.right {
		if it.deleted() {
			continue
		}
		r.eachVersionSpan(it.client(), it.clock(), it.endClock(), func(clock, end uint64, visible bool) {
			if !visible {
				gone = append(gone, span{it.client(), clock, end})
			}
		})
	}
	for _, s := range gone {
		r.deleteSpan(s.client, s.clock, s.end)
	}
	// What the version shows is kept where it is still visible and inserted again, after
	// what precedes it in the version, where it is not.
	var left *item
	for vi := v.start; vi != nil; vi = vi.right {
		if vi.deleted() {
			continue
		}
		c, clock, end := vi.client(), vi.clock(), vi.endClock()
		for clock < end {
			l := store.clients[c]
			if l == nil || clock >= l.state() {
				left = r.insertCopy(d, left, vi, clock-vi.clock(), end-clock)
				break
			}
			di := l.at(l.find(clock))
			segEnd := min(end, di.endClock())
			if di.deleted() {
				left = r.insertCopy(d, left, vi, clock-vi.clock(), segEnd-clock)
			} else {
				left = store.itemCleanEnd(r.tx, ID{c, segEnd - 1})
				if dt := left.childType(); dt != nil {
					r.jobs = append(r.jobs, restoreJob{d: dt, v: vi.childType()})
				}
			}
			clock = segEnd
		}
	}
	// Map entries (a map's keys, an element's attributes, a text's attributes).
	keys := map[string]bool{}
	for k := range d.entries {
		keys[k] = true
	}
	for k := range v.entries {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, key := range sorted {
		vi, di := v.entries[key], d.entries[key]
		vVisible := vi != nil && !vi.deleted()
		dVisible := di != nil && !di.deleted()
		switch {
		case vVisible && dVisible && di.lastID() == vi.lastID():
			if dt := di.childType(); dt != nil {
				r.jobs = append(r.jobs, restoreJob{d: dt, v: vi.childType()})
			}
		case vVisible:
			r.setCopy(d, key, vi)
		case dVisible:
			di.delete(r.tx)
		}
	}
}

// eachVersionSpan splits [clock, end) of client into the spans the version knows as one
// struct each and reports whether each is visible there (a span the version does not know
// is not).
func (r *restorer) eachVersionSpan(client, clock, end uint64, f func(clock, end uint64, visible bool)) {
	l := r.v.store.clients[client]
	for clock < end {
		if l == nil || clock >= l.state() {
			f(clock, end, false)
			return
		}
		vi := l.at(l.find(clock))
		segEnd := min(end, vi.endClock())
		f(clock, segEnd, !vi.deleted())
		clock = segEnd
	}
}

// deleteSpan deletes the units [clock, end) of client in the current document.
func (r *restorer) deleteSpan(client, clock, end uint64) {
	store := &r.d.store
	for clock < end {
		it := store.itemCleanStart(r.tx, ID{client, clock})
		if it.endClock() > end {
			it = store.itemCleanEnd(r.tx, ID{client, end - 1})
		}
		it.delete(r.tx)
		clock = it.endClock()
	}
}

// insertCopy inserts, after left in d (at its start when left is nil), a new item holding
// units [off, off+n) of vi's content, and returns it.
func (r *restorer) insertCopy(d *Type, left, vi *item, off, n uint64) *item {
	right := d.start
	if left != nil {
		right = left.right
	}
	c := r.copyContent(vi.detached(), off, n)
	return r.tx.insertItem(left, right, d, "", false, c)
}

// setCopy sets key of d to a copy of the version's entry vi.
func (r *restorer) setCopy(d *Type, key string, vi *item) {
	c := r.copyContent(vi.detached(), 0, vi.len())
	r.tx.insertItem(d.entries[key], nil, d, key, true, c)
}

// copyContent returns new content holding units [off, off+n) of c. A nested type is copied
// as a new empty type of the same kind, filled by a job queued here (it runs once the new
// type is in the document).
func (r *restorer) copyContent(c content, off, n uint64) content {
	switch x := c.(type) {
	case *contentString:
		cp := &contentString{b: bytes.Clone(x.b), u16: x.u16}
		var out content = cp
		if off > 0 {
			out = cp.splice(off)
		}
		if out.len() > n {
			out.splice(n)
		}
		return out
	case *contentAny:
		return &contentAny{vals: slices.Clone(x.vals[off : off+n])}
	case *contentJSON:
		return &contentJSON{vals: slices.Clone(x.vals[off : off+n])}
	case *contentBinary:
		return &contentBinary{b: bytes.Clone(x.b)}
	case *contentEmbed:
		return &contentEmbed{v: x.v}
	case *contentFormat:
		return &contentFormat{key: x.key, val: x.val}
	case *contentDoc:
		opts := []SubdocOption{SubdocGC(x.doc.gc), SubdocAutoLoad(x.doc.autoLoad)}
		if x.doc.meta != nil {
			opts = append(opts, SubdocMeta(x.doc.meta))
		}
		return &contentDoc{doc: NewSubdoc(x.doc.guid, opts...)}
	case *contentType:
		t := newType(x.t.kind)
		t.nodeName = x.t.nodeName
		r.jobs = append(r.jobs, restoreJob{d: t, v: x.t, fill: true})
		return &contentType{t: t}
	}
	panic(fmt.Sprintf("yjs: restoring content of ref %d, which is never visible", c.ref()))
}

// contentKey renders what a type shows — its visible items in order (text runs, values,
// formatting marks, embeds, nested types) and its entries by key — as one string, so that
// two types compare equal exactly when they show the same content, whoever made it and
// however its items are split.
func contentKey(t *Type) string {
	var b strings.Builder
	type frame struct {
		t    *Type
		open bool
	}
	stack := []frame{{t: t}}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if f.open {
			b.WriteString(")")
			continue
		}
		b.WriteString("(" + f.t.kind.String() + ":" + f.t.nodeName + "[")
		var nested []*Type
		inText := false
		for it := f.t.start; it != nil; it = it.right {
			if it.deleted() {
				continue
			}
			if it.isString() {
				if !inText {
					b.WriteString("s\"")
					inText = true
				}
				b.Write(it.str())
				continue
			}
			if inText {
				b.WriteString("\"")
				inText = false
			}
			nested = contentKeyOf(&b, it.detached(), nested)
		}
		if inText {
			b.WriteString("\"")
		}
		b.WriteString("]{")
		for _, k := range f.t.sortedKeys() {
			it := f.t.entries[k]
			if it.deleted() {
				continue
			}
			b.WriteString(strconv.Quote(k) + "=")
			nested = contentKeyOf(&b, it.detached(), nested)
		}
		b.WriteString("}")
		// Nested types are rendered after their parent, in order, each bracketed.
		stack = append(stack, frame{t: f.t, open: true})
		for i := len(nested) - 1; i >= 0; i-- {
			stack = append(stack, frame{t: nested[i]})
		}
	}
	return b.String()
}

// contentKeyOf writes one visible content (not a string run) and collects a nested type.
func contentKeyOf(b *strings.Builder, c content, nested []*Type) []*Type {
	switch x := c.(type) {
	case *contentFormat:
		b.WriteString("f" + strconv.Quote(x.key) + ":" + jsonStringify(x.val) + ";")
	case *contentEmbed:
		b.WriteString("e" + jsonStringify(x.v) + ";")
	case *contentType:
		b.WriteString("t;")
		nested = append(nested, x.t)
	case *contentDoc:
		b.WriteString("d" + strconv.Quote(x.doc.guid) + ";")
	case *contentBinary:
		b.WriteString("b" + strconv.Quote(string(x.b)) + ";")
	default:
		for _, v := range c.appendValues(nil) {
			b.WriteString("v" + jsonStringify(v) + ";")
		}
	}
	return nested
}
