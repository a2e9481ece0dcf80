package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"unicode"
	"unicode/utf8"

	"github.com/nomicore/nomicore/lib0"
)

// Names, labels, listing and deletion of entries.
//
// The catalog keeps three indexes beside the entries, all derived from them and changed in
// the same transaction as the entry they describe (the bbolt store keeps them in the bucket
// index/, the memory store in a map):
//
//	'o' owner ns               every active or archived namespace of an owner
//	'n' name owner      → ns   the name of a namespace (unique per owner)
//	'l' key value ns           one key per label of a namespace
//
// where owner, name, key and value are lib0 var strings (a length, then the bytes), so that
// one component is never the prefix of another. ListEntries walks the most selective index
// its query allows from the page's cursor, and reads only the entries it returns or has to
// check against the rest of the query: a page of 100 out of 100,000 namespaces reads about
// 100 entries, never the whole catalog. Tombstones have no index keys.

// Limits of names and labels.
const (
	MaxEntryNameBytes = 255 // a name: 1..255 bytes of UTF-8 without control characters
	MaxLabels         = 64  // labels of one namespace
	MaxLabelKeyBytes  = 63  // a label key: 1..63 of [A-Za-z0-9._/-], starting with a letter or digit
	MaxLabelValBytes  = 255 // a label value: 0..255 bytes of UTF-8 without control characters
	MaxListLimit      = 1000
	DefaultListLimit  = 100
)

// EntryQuery selects entries for ListEntries. Every field that is set must match.
type EntryQuery struct {
	Owner  string            // the owner ("" for any)
	Name   string            // the exact name ("" for any)
	Labels map[string]string // labels the entry must have, with these values
	// After is the cursor: only namespace ids after it (the Next of the previous page).
	After string
	// Limit is the page size: 1..MaxListLimit; 0 means DefaultListLimit.
	Limit int
}

// EntryPage is one page of ListEntries.
type EntryPage struct {
	Entries []Entry
	// Next is the cursor of the next page (EntryQuery.After), "" when this page is the last.
	Next string
}

// EntryChange is what Relabel changes: a nil field is kept as it is.
type EntryChange struct {
	Name   *string            // the new name ("" removes it)
	Labels *map[string]string // the new labels, replacing all (empty removes them)
}

// CheckEntryName says whether name can name a namespace ("" — no name — can).
func CheckEntryName(name string) error {
	if name == "" {
		return nil
	}
	if len(name) > MaxEntryNameBytes || !utf8.ValidString(name) || hasControl(name) {
		return fmt.Errorf("%w: a name is 1..%d bytes of UTF-8 without control characters", ErrInvalid, MaxEntryNameBytes)
	}
	return nil
}

// CheckLabels says whether labels can label a namespace.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%w: at most %d labels, got %d", ErrInvalid, MaxLabels, len(labels))
	}
	for k, v := range labels {
		if err := CheckLabelKey(k); err != nil {
			return err
		}
		if len(v) > MaxLabelValBytes || !utf8.ValidString(v) || hasControl(v) {
			return fmt.Errorf("%w: the value of label %q must be 0..%d bytes of UTF-8 without control characters", ErrInvalid, k, MaxLabelValBytes)
		}
	}
	return nil
}

// CheckLabelKey says whether k can be a label key.
func CheckLabelKey(k string) error {
	ok := len(k) >= 1 && len(k) <= MaxLabelKeyBytes && isAlnum(k[0])
	for i := 0; ok && i < len(k); i++ {
		c := k[i]
		ok = isAlnum(c) || c == '.' || c == '_' || c == '/' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%w: label key %q must be 1..%d of letters, digits and . _ / -, starting with a letter or digit", ErrInvalid, k, MaxLabelKeyBytes)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

func cloneLabels(m map[string]string) map[string]string { return cloneMeta(m) }

// ---- index keys ----

const (
	idxOwner = 'o'
	idxName  = 'n'
	idxLabel = 'l'
)

func ownerPrefix(owner string) []byte { return lib0.AppendVarString([]byte{idxOwner}, owner) }

func namePrefix(name string) []byte { return lib0.AppendVarString([]byte{idxName}, name) }

func nameKey(name, owner string) []byte { return lib0.AppendVarString(namePrefix(name), owner) }

func labelPrefix(k, v string) []byte {
	return lib0.AppendVarString(lib0.AppendVarString([]byte{idxLabel}, k), v)
}

// indexKeys are the index keys of e, each with its value (nil but for the name).
func indexKeys(e Entry) (keys, values [][]byte) {
	if e.State == StateDeleted {
		return nil, nil
	}
	keys = append(keys, append(ownerPrefix(e.Owner), e.NamespaceID...))
	values = append(values, nil)
	if e.Name != "" {
		keys = append(keys, nameKey(e.Name, e.Owner))
		values = append(values, []byte(e.NamespaceID))
	}
	for _, k := range sortedKeys(e.Labels) {
		keys = append(keys, append(labelPrefix(k, e.Labels[k]), e.NamespaceID...))
		values = append(values, nil)
	}
	return keys, values
}

func putIndex(w writer, e Entry) error {
	keys, values := indexKeys(e)
	for i, k := range keys {
		if err := w.indexPut(k, values[i]); err != nil {
			return err
		}
	}
	return nil
}

func dropIndex(w writer, e Entry) error {
	keys, _ := indexKeys(e)
	for _, k := range keys {
		if err := w.indexDelete(k); err != nil {
			return err
		}
	}
	return nil
}

// checkNameFree fails with ErrNameTaken when another namespace of e's owner has e's name.
func checkNameFree(r reader, e Entry) error {
	if e.Name == "" {
		return nil
	}
	v, err := r.indexGet(nameKey(e.Name, e.Owner))
	if err != nil {
		return err
	}
	if v != nil && string(v) != e.NamespaceID {
		return fmt.Errorf("%w: owner %s already has a namespace named %q", ErrNameTaken, e.Owner, e.Name)
	}
	return nil
}

// ---- engine ----

func (e *engine) ListEntries(ctx context.Context, q EntryQuery) (page EntryPage, err error) {
	switch {
	case q.Limit == 0:
		q.Limit = DefaultListLimit
	case q.Limit < 0 || q.Limit > MaxListLimit:
		return EntryPage{}, fmt.Errorf("%w: limit must be 1..%d", ErrInvalid, MaxListLimit)
	}
	err = e.view(ctx, func(r reader) error {
		page, err = listEntries(r, q)
		return err
	})
	return page, err
}

// matches says whether ent is listed by q.
func (q *EntryQuery) matches(ent Entry) bool {
	if ent.State == StateDeleted || (q.Owner != "" && ent.Owner != q.Owner) || (q.Name != "" && ent.Name != q.Name) {
		return false
	}
	for k, v := range q.Labels {
		if got, ok := ent.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func listEntries(r reader, q EntryQuery) (EntryPage, error) {
	var page EntryPage
	// take adds the entry of ns when it matches; false once the page is full (one more
	// than the limit was found, so a next page exists).
	take := func(ns string) (bool, error) {
		if ns <= q.After {
			return true, nil
		}
		ent, err := r.entry(ns)
		if errors.Is(err, ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if !q.matches(ent) {
			return true, nil
		}
		if len(page.Entries) == q.Limit {
			page.Next = page.Entries[len(page.Entries)-1].NamespaceID
			return false, nil
		}
		page.Entries = append(page.Entries, ent)
		return true, nil
	}
	// scan walks the index keys under prefix whose namespace id (the rest of the key)
	// comes after the cursor.
	scan := func(prefix []byte) error {
		from := append(bytes.Clone(prefix), q.After...)
		return r.indexScan(prefix, from, func(k, _ []byte) (bool, error) { return take(string(k[len(prefix):])) })
	}
	switch {
	case q.Name != "":
		// A name is unique per owner: at most one namespace per owner.
		var ids []string
		prefix := namePrefix(q.Name)
		if q.Owner != "" {
			prefix = nameKey(q.Name, q.Owner)
		}
		err := r.indexScan(prefix, prefix, func(_, v []byte) (bool, error) {
			ids = append(ids, string(v))
			return true, nil
		})
		if err != nil {
			return EntryPage{}, err
		}
		sort.Strings(ids)
		for _, ns := range ids {
			if more, err := take(ns); err != nil || !more {
				return page, err
			}
		}
		return page, nil
	case len(q.Labels) > 0:
		k := sortedKeys(q.Labels)[0]
		return page, scan(labelPrefix(k, q.Labels[k]))
	case q.Owner != "":
		return page, scan(ownerPrefix(q.Owner))
	}
	return page, r.entryScan(q.After, func(ent Entry) (bool, error) {
		if !q.matches(ent) {
			return true, nil
		}
		if len(page.Entries) == q.Limit {
			page.Next = page.Entries[len(page.Entries)-1].NamespaceID
			return false, nil
		}
		page.Entries = append(page.Entries, ent)
		return true, nil
	})
}

func (e *engine) Relabel(ctx context.Context, owner, ns string, change EntryChange) (ent Entry, err error) {
	if _, err := checkKey(owner, ns); err != nil {
		return Entry{}, err
	}
	if change.Name != nil {
		if err := CheckEntryName(*change.Name); err != nil {
			return Entry{}, err
		}
	}
	if change.Labels != nil {
		if err := CheckLabels(*change.Labels); err != nil {
			return Entry{}, err
		}
	}
	err = e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error {
			old, err := w.entry(ns)
			if err != nil {
				return err
			}
			if old.Owner != owner || old.State != StateActive {
				return fmt.Errorf("%w: no active namespace %s of owner %s", ErrNotFound, ns, owner)
			}
			ent = old
			if change.Name != nil {
				ent.Name = *change.Name
			}
			if change.Labels != nil {
				ent.Labels = cloneLabels(*change.Labels)
			}
			if err := checkNameFree(w, ent); err != nil {
				return err
			}
			if err := dropIndex(w, old); err != nil {
				return err
			}
			if err := putIndex(w, ent); err != nil {
				return err
			}
			return w.putEntry(ent)
		})
	})
	if err != nil {
		return Entry{}, err
	}
	return ent, nil
}

func (e *engine) DeleteEntry(ctx context.Context, owner, ns string) error {
	_, err := e.Delete(ctx, owner, ns, false)
	return err
}

func (e *engine) Delete(ctx context.Context, owner, ns string, keepArchive bool) (ArchiveInfo, error) {
	key, err := checkKey(owner, ns)
	if err != nil {
		return ArchiveInfo{}, err
	}
	if e.readOnly {
		return ArchiveInfo{}, ErrReadOnly
	}
	c := &control{key: key, reason: ReasonDelete, keep: keepArchive}
	if err := e.control(ctx, opDelete, c); err != nil {
		return ArchiveInfo{}, err
	}
	if e.feedOn() {
		e.changesCommitted()
	}
	return c.info, nil
}

// writeDelete is the transaction of Delete: the document archived or removed, its versions
// dropped, the index keys dropped, the entry a tombstone, and — in a store that keeps a
// change feed — the namespace's "deleted" record. All in one transaction, so that a delete
// that is durable is in the feed whatever happens to the process after it commits.
func (e *engine) writeDelete(w writer, c *control) error {
	ent, err := w.entry(c.key.ns)
	if err != nil {
		return err
	}
	if ent.Owner != c.key.owner || ent.State == StateDeleted {
		return fmt.Errorf("%w: no namespace %s of owner %s", ErrNotFound, c.key.ns, c.key.owner)
	}
	if c.keep {
		info, err := w.archiveDoc(c.key.owner, c.key.ns, ArchiveInfo{NamespaceID: c.key.ns, Reason: ReasonDelete, Entry: ent})
		if err != nil {
			return err
		}
		c.info = info
	} else if err := w.deleteDoc(c.key.owner, c.key.ns); err != nil {
		return err
	}
	if err := w.deleteVersions(c.key.ns); err != nil {
		return err
	}
	if err := dropIndex(w, ent); err != nil {
		return err
	}
	if err := w.putEntry(Entry{NamespaceID: ent.NamespaceID, Owner: ent.Owner, State: StateDeleted, CreatedAt: ent.CreatedAt}); err != nil {
		return err
	}
	if e.feedOn() {
		return e.writeChange(w, Change{Kind: ChangeDeleted, Owner: ent.Owner, NamespaceID: ent.NamespaceID})
	}
	return nil
}

// rebuildIndex drops every index key and makes them again from the entries (a store written
// before the indexes existed, or a repair).
func rebuildIndex(w writer) error {
	if err := w.indexClear(); err != nil {
		return err
	}
	return w.entryScan("", func(ent Entry) (bool, error) {
		return true, putIndex(w, ent)
	})
}

// verifyIndex checks that the index holds exactly the keys the entries give.
func verifyIndex(r reader) error {
	want := map[string]string{}
	err := r.entryScan("", func(ent Entry) (bool, error) {
		keys, values := indexKeys(ent)
		for i, k := range keys {
			want[string(k)] = string(values[i])
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	var problems []string
	err = r.indexScan(nil, nil, func(k, v []byte) (bool, error) {
		w, ok := want[string(k)]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("index key %x names no entry", k))
		case w != string(v):
			problems = append(problems, fmt.Sprintf("index key %x holds %q, want %q", k, v, w))
		}
		delete(want, string(k))
		return len(problems) < 10, nil
	})
	if err != nil {
		return err
	}
	for k := range want {
		if len(problems) >= 10 {
			break
		}
		problems = append(problems, fmt.Sprintf("index key %x is missing", k))
	}
	if len(problems) > 0 {
		return fmt.Errorf("the catalog's index does not match its entries: %v", problems)
	}
	return nil
}
