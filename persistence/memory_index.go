package persistence

import (
	"sort"
	"strings"
)

// The memory backend's part of names.go: entries scanned in id order, the index as a map
// sorted when scanned (the memory store is for tests; its catalogs are small).

func (m *memBackend) entryScan(after string, fn func(Entry) (bool, error)) error {
	ids := make([]string, 0, len(m.entryMap))
	for id := range m.entryMap {
		if id > after {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if more, err := fn(cloneEntry(m.entryMap[id])); err != nil || !more {
			return err
		}
	}
	return nil
}

func (m *memBackend) indexGet(key []byte) ([]byte, error) {
	v, ok := m.indexMap[string(key)]
	if !ok {
		return nil, nil
	}
	return append([]byte{}, v...), nil
}

func (m *memBackend) indexScan(prefix, from []byte, fn func(key, value []byte) (bool, error)) error {
	var keys []string
	for k := range m.indexMap {
		if strings.HasPrefix(k, string(prefix)) && k >= string(from) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if more, err := fn([]byte(k), append([]byte{}, m.indexMap[k]...)); err != nil || !more {
			return err
		}
	}
	return nil
}

func (m *memBackend) indexPut(key, value []byte) error {
	k := string(key)
	old, had := m.indexMap[k]
	m.undo = append(m.undo, func() {
		if had {
			m.indexMap[k] = old
		} else {
			delete(m.indexMap, k)
		}
	})
	m.indexMap[k] = append([]byte{}, value...)
	return nil
}

func (m *memBackend) indexDelete(key []byte) error {
	k := string(key)
	old, had := m.indexMap[k]
	if !had {
		return nil
	}
	m.undo = append(m.undo, func() { m.indexMap[k] = old })
	delete(m.indexMap, k)
	return nil
}

func (m *memBackend) indexClear() error {
	old := m.indexMap
	m.undo = append(m.undo, func() { m.indexMap = old })
	m.indexMap = make(map[string][]byte)
	return nil
}

func (m *memBackend) deleteDoc(owner, ns string) error {
	m.setDoc(docKey{owner, ns}, nil)
	return nil
}
