package persistence

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

func (e *engine) CreateEntry(ctx context.Context, ent Entry, snapshot []byte) error {
	key, err := checkKey(ent.Owner, ent.NamespaceID)
	if err != nil {
		return err
	}
	switch ent.State {
	case 0:
		ent.State = StateActive
	case StateActive:
	default:
		return fmt.Errorf("%w: a new entry must be active, not %v", ErrInvalid, ent.State)
	}
	ent.Meta = cloneMeta(ent.Meta)
	var sv []byte
	if e.feedOn() {
		sv = e.stateVectorOf(snapshot)
	}
	ent.Labels = cloneLabels(ent.Labels)
	if err := CheckEntryName(ent.Name); err != nil {
		return err
	}
	if err := CheckLabels(ent.Labels); err != nil {
		return err
	}
	err = e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error {
			if _, err := w.entry(ent.NamespaceID); err == nil {
				return ErrExists
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
			if info, err := w.docInfo(ent.Owner, ent.NamespaceID); err != nil {
				return err
			} else if info.HasDoc {
				return ErrExists
			}
			if err := checkNameFree(w, ent); err != nil {
				return err
			}
			if err := putIndex(w, ent); err != nil {
				return err
			}
			if err := w.putEntry(ent); err != nil {
				return err
			}
			if err := w.createDoc(ent.Owner, ent.NamespaceID, snapshot); err != nil {
				return err
			}
			if e.feedOn() {
				return e.writeChange(w, Change{Kind: ChangeCreated, Owner: ent.Owner, NamespaceID: ent.NamespaceID, StateVector: sv})
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if e.feedOn() {
		e.changesCommitted()
	}
	e.mu.Lock()
	e.res[key] = &resident{key: key, snapBytes: len(snapshot)}
	e.mu.Unlock()
	return nil
}

func (e *engine) Entry(ctx context.Context, ns string) (ent Entry, err error) {
	if err := checkName("namespace id", ns); err != nil {
		return Entry{}, err
	}
	err = e.view(ctx, func(r reader) error {
		ent, err = r.entry(ns)
		return err
	})
	return ent, err
}

func (e *engine) Entries(ctx context.Context, owner string) (list []Entry, err error) {
	if owner != "" {
		if err := checkName("owner", owner); err != nil {
			return nil, err
		}
	}
	err = e.view(ctx, func(r reader) error {
		list, err = r.entries(owner)
		return err
	})
	// Tombstones are no namespaces to list.
	list = slices.DeleteFunc(list, func(e Entry) bool { return e.State == StateDeleted })
	return list, err
}

func (e *engine) PutConfig(ctx context.Context, key string, value []byte) error {
	if err := checkName("config key", key); err != nil {
		return err
	}
	return e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error { return w.putConfig(key, value) })
	})
}

func (e *engine) Config(ctx context.Context, key string) (value []byte, err error) {
	if err := checkName("config key", key); err != nil {
		return nil, err
	}
	err = e.view(ctx, func(r reader) error {
		value, err = r.config(key)
		return err
	})
	return value, err
}

func (e *engine) DeleteConfig(ctx context.Context, key string) error {
	if err := checkName("config key", key); err != nil {
		return err
	}
	return e.direct(ctx, true, func() error {
		return e.be.update(func(w writer) error { return w.deleteConfig(key) })
	})
}

func (e *engine) ConfigKeys(ctx context.Context, prefix string) (keys []string, err error) {
	err = e.view(ctx, func(r reader) error {
		keys, err = r.configKeys(prefix)
		return err
	})
	return keys, err
}

func cloneMeta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (e *engine) Healthy() bool { return e.healthy.Load() }

func (e *engine) Stats() Stats {
	e.mu.Lock()
	s := Stats{Resident: len(e.res), Queued: e.qAppends, QueuedBytes: e.qBytes}
	e.mu.Unlock()
	s.Commits = e.commits.Load()
	s.Committed = e.committed.Load()
	s.CommitErrors = e.commitErrors.Load()
	s.Backpressure = e.backpressure.Load()
	s.Compactions = e.compactions.Load()
	return s
}
