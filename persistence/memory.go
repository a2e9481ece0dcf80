package persistence

import (
	"slices"
	"sort"
	"strings"
	"sync"
)

// MemoryStore is a Store that keeps everything in memory, for tests. It runs the same write
// pipeline as BoltStore (group commit, compaction, backpressure, failure injection through
// Options.CommitHook); only the durability differs.
type MemoryStore struct {
	*engine
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty in-memory store. Close it to stop its goroutines.
func NewMemoryStore(opts Options) (*MemoryStore, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	opts.ReadOnly = false
	return &MemoryStore{newEngine(newMemBackend(), opts)}, nil
}

// memBackend keeps the data model in maps. A write transaction holds the lock and records an
// undo step for each change, replayed backwards when the transaction fails.
type memBackend struct {
	mu         sync.RWMutex // guards the maps and undo; a write transaction holds it for writing
	entryMap   map[string]Entry
	docMap     map[docKey]*memDoc
	archiveMap map[string][]*memArchive // by namespace, in id order
	configMap  map[string][]byte
	feed       *memFeed          // the change feed and the versions (feed_memory.go)
	indexMap   map[string][]byte // the catalog's index (names.go)
	undo       []func()          // during a write transaction
}

type memDoc struct {
	snapshot []byte
	through  uint64 // snapshot through
	log      []memUpdate
}

type memUpdate struct {
	seq  uint64
	data []byte
}

type memArchive struct {
	info ArchiveInfo
	doc  *memDoc // nil when the namespace had no document
}

func newMemBackend() *memBackend {
	return &memBackend{
		entryMap:   make(map[string]Entry),
		docMap:     make(map[docKey]*memDoc),
		archiveMap: make(map[string][]*memArchive),
		configMap:  make(map[string][]byte),
		feed:       &memFeed{latest: map[string]Change{}, versions: map[string]*memVersions{}},
		indexMap:   make(map[string][]byte),
	}
}

func (m *memBackend) view(fn func(r reader) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(m)
}

func (m *memBackend) update(fn func(w writer) error) (err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.undo = m.undo[:0]
	defer func() {
		if p := recover(); p != nil {
			m.rollback()
			panic(p)
		}
		if err != nil {
			m.rollback()
		}
		m.undo = m.undo[:0]
	}()
	return fn(m)
}

func (m *memBackend) rollback() {
	for i := len(m.undo) - 1; i >= 0; i-- {
		m.undo[i]()
	}
}

func (m *memBackend) close() error { return nil }

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneEntry(e Entry) Entry {
	e.Meta = cloneMeta(e.Meta)
	e.Labels = cloneLabels(e.Labels)
	return e
}

// ---- reader ----

func (m *memBackend) entry(ns string) (Entry, error) {
	e, ok := m.entryMap[ns]
	if !ok {
		return Entry{}, ErrNotFound
	}
	return cloneEntry(e), nil
}

func (m *memBackend) entries(owner string) ([]Entry, error) {
	var out []Entry
	for _, e := range m.entryMap {
		if owner == "" || e.Owner == owner {
			out = append(out, cloneEntry(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NamespaceID < out[j].NamespaceID })
	return out, nil
}

func (d *memDoc) read() Doc {
	doc := Doc{Snapshot: clone(d.snapshot), SnapshotThrough: d.through, Through: d.through}
	for _, u := range d.log {
		doc.Updates = append(doc.Updates, clone(u.data))
		doc.Through = u.seq
	}
	return doc
}

func (d *memDoc) info(owner, ns string) DocInfo {
	info := DocInfo{Owner: owner, NamespaceID: ns, HasDoc: true, SnapshotBytes: len(d.snapshot),
		SnapshotThrough: d.through, Through: d.through, LogUpdates: len(d.log)}
	for _, u := range d.log {
		info.LogBytes += len(u.data)
		info.Through = u.seq
	}
	return info
}

func (m *memBackend) doc(owner, ns string) (Doc, error) {
	d, ok := m.docMap[docKey{owner, ns}]
	if !ok {
		return Doc{}, ErrNotFound
	}
	return d.read(), nil
}

func (m *memBackend) docInfo(owner, ns string) (DocInfo, error) {
	d, ok := m.docMap[docKey{owner, ns}]
	if !ok {
		return DocInfo{Owner: owner, NamespaceID: ns}, nil
	}
	return d.info(owner, ns), nil
}

func (m *memBackend) docs() ([]DocInfo, error) {
	var out []DocInfo
	for k, d := range m.docMap {
		out = append(out, d.info(k.owner, k.ns))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Owner != out[j].Owner {
			return out[i].Owner < out[j].Owner
		}
		return out[i].NamespaceID < out[j].NamespaceID
	})
	return out, nil
}

func (m *memBackend) archives(ns string) ([]ArchiveInfo, error) {
	var out []ArchiveInfo
	for n, list := range m.archiveMap {
		if ns != "" && n != ns {
			continue
		}
		for _, a := range list {
			info := a.info
			info.Entry = cloneEntry(info.Entry)
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NamespaceID != out[j].NamespaceID {
			return out[i].NamespaceID < out[j].NamespaceID
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (m *memBackend) archive(ns string, id uint64) (Doc, error) {
	for _, a := range m.archiveMap[ns] {
		if a.info.ID == id {
			if a.doc == nil {
				return Doc{}, nil
			}
			return a.doc.read(), nil
		}
	}
	return Doc{}, ErrNotFound
}

func (m *memBackend) config(key string) ([]byte, error) {
	v, ok := m.configMap[key]
	if !ok {
		return nil, ErrNotFound
	}
	return clone(v), nil
}

func (m *memBackend) configKeys(prefix string) ([]string, error) {
	var out []string
	for k := range m.configMap {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ---- writer ----

func (m *memBackend) putEntry(e Entry) error {
	old, had := m.entryMap[e.NamespaceID]
	m.undo = append(m.undo, func() {
		if had {
			m.entryMap[e.NamespaceID] = old
		} else {
			delete(m.entryMap, e.NamespaceID)
		}
	})
	m.entryMap[e.NamespaceID] = cloneEntry(e)
	return nil
}

func (m *memBackend) deleteEntry(ns string) error {
	old, had := m.entryMap[ns]
	if !had {
		return nil
	}
	m.undo = append(m.undo, func() { m.entryMap[ns] = old })
	delete(m.entryMap, ns)
	return nil
}

// setDoc replaces the document of k (nil removes it), recording how to undo that.
func (m *memBackend) setDoc(k docKey, d *memDoc) {
	old, had := m.docMap[k]
	m.undo = append(m.undo, func() {
		if had {
			m.docMap[k] = old
		} else {
			delete(m.docMap, k)
		}
	})
	if d == nil {
		delete(m.docMap, k)
	} else {
		m.docMap[k] = d
	}
}

func (m *memBackend) createDoc(owner, ns string, snapshot []byte) error {
	m.setDoc(docKey{owner, ns}, &memDoc{snapshot: clone(snapshot)})
	return nil
}

func (m *memBackend) appendUpdate(owner, ns string, seq uint64, update []byte) error {
	d := m.docMap[docKey{owner, ns}]
	if d == nil {
		return ErrNotFound
	}
	n := len(d.log)
	m.undo = append(m.undo, func() { d.log = d.log[:n] })
	d.log = append(d.log, memUpdate{seq, clone(update)})
	return nil
}

func (m *memBackend) setSnapshot(owner, ns string, snapshot []byte, through uint64) error {
	d := m.docMap[docKey{owner, ns}]
	if d == nil {
		return ErrNotFound
	}
	oldSnap, oldThrough := d.snapshot, d.through
	m.undo = append(m.undo, func() { d.snapshot, d.through = oldSnap, oldThrough })
	d.snapshot, d.through = clone(snapshot), through
	return nil
}

func (m *memBackend) trimLog(owner, ns string, through uint64) (count, n int, err error) {
	d := m.docMap[docKey{owner, ns}]
	if d == nil {
		return 0, 0, ErrNotFound
	}
	for count < len(d.log) && d.log[count].seq <= through {
		n += len(d.log[count].data)
		count++
	}
	if count > 0 {
		oldLog := d.log
		m.undo = append(m.undo, func() { d.log = oldLog })
		d.log = slices.Clone(d.log[count:])
	}
	return count, n, nil
}

func (m *memBackend) archiveDoc(owner, ns string, info ArchiveInfo) (ArchiveInfo, error) {
	k := docKey{owner, ns}
	list := m.archiveMap[ns]
	info.ID = uint64(len(list)) + 1
	a := &memArchive{}
	if d := m.docMap[k]; d != nil {
		a.doc = d // no longer reachable for writes once removed below
		info.DocInfo = d.info(owner, ns)
	}
	info.Entry = cloneEntry(info.Entry)
	a.info = info
	m.undo = append(m.undo, func() { m.archiveMap[ns] = list })
	m.archiveMap[ns] = append(slices.Clip(list), a)
	m.setDoc(k, nil)
	return info, nil
}

func (m *memBackend) putConfig(key string, value []byte) error {
	old, had := m.configMap[key]
	m.undo = append(m.undo, func() {
		if had {
			m.configMap[key] = old
		} else {
			delete(m.configMap, key)
		}
	})
	m.configMap[key] = clone(value)
	return nil
}

func (m *memBackend) deleteConfig(key string) error {
	old, had := m.configMap[key]
	if !had {
		return nil
	}
	m.undo = append(m.undo, func() { m.configMap[key] = old })
	delete(m.configMap, key)
	return nil
}

func (m *memBackend) probe() error { return nil }
