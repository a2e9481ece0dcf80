package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// Names, labels, listing and deletion in the cluster's catalog.
//
// Names are unique per owner across the cluster: a name is claimed by creating the key
// name-<sha256(owner, name)> in EntriesBucket (a create fails when any node holds the
// claim), whose value is the namespace id; the entry's own record carries the name and the
// labels. Listing reads the bucket's current values (the cluster keeps no index: its
// catalogs are read whole, as Entries does) and pages through them in namespace id order.
//
// Deleting a namespace turns its entry into a tombstone (state deleted, by compare-and-set
// of the revision read), releases its name, purges its log subject and removes its
// snapshot object: nothing of its document stays in JetStream, and the id is never taken
// again (Create of the key fails).

func nameClaimKey(owner, name string) string {
	h := sha256.Sum256([]byte(owner + "\x00" + name))
	return "name-" + hex.EncodeToString(h[:16])
}

// claimName claims name for ns under owner; ErrNameTaken when another namespace holds it.
func (s *Store) claimName(ctx context.Context, owner, name, ns string) error {
	key := nameClaimKey(owner, name)
	return s.n.op(ctx, "claiming a namespace name", func(ctx context.Context, r *resources) error {
		_, err := r.entries.Create(ctx, key, []byte(ns))
		if errors.Is(err, jetstream.ErrKeyExists) {
			kve, gerr := r.entries.Get(ctx, key)
			if gerr == nil && string(kve.Value()) == ns {
				return nil
			}
			return fmt.Errorf("%w: owner %s already has a namespace named %q", persistence.ErrNameTaken, owner, name)
		}
		return err
	})
}

// releaseName gives up ns's claim of name (best effort: a claim left behind names a
// namespace that no longer has that name, and is taken over by the next claim of it).
func (s *Store) releaseName(ctx context.Context, owner, name, ns string) {
	s.n.releaseName(ctx, owner, name, ns)
}

func (n *Node) releaseName(ctx context.Context, owner, name, ns string) {
	key := nameClaimKey(owner, name)
	_ = n.op(ctx, "releasing a namespace name", func(ctx context.Context, r *resources) error {
		kve, err := r.entries.Get(ctx, key)
		if err != nil || string(kve.Value()) != ns {
			return nil
		}
		return r.entries.Delete(ctx, key, jetstream.LastRevision(kve.Revision()))
	})
}

// ListEntries pages through the entries q selects.
func (s *Store) ListEntries(ctx context.Context, q persistence.EntryQuery) (persistence.EntryPage, error) {
	switch {
	case q.Limit == 0:
		q.Limit = persistence.DefaultListLimit
	case q.Limit < 0 || q.Limit > persistence.MaxListLimit:
		return persistence.EntryPage{}, fmt.Errorf("%w: limit must be 1..%d", persistence.ErrInvalid, persistence.MaxListLimit)
	}
	all, err := s.Entries(ctx, q.Owner)
	if err != nil {
		return persistence.EntryPage{}, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].NamespaceID < all[j].NamespaceID })
	var page persistence.EntryPage
	for _, e := range all {
		if e.NamespaceID <= q.After || (q.Name != "" && e.Name != q.Name) || !hasLabels(e, q.Labels) {
			continue
		}
		if len(page.Entries) == q.Limit {
			page.Next = page.Entries[len(page.Entries)-1].NamespaceID
			break
		}
		page.Entries = append(page.Entries, e)
	}
	return page, nil
}

func hasLabels(e persistence.Entry, want map[string]string) bool {
	for k, v := range want {
		if got, ok := e.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// updateEntry changes the entry of ns with f by compare-and-set, reading it again when
// another node changed it meanwhile.
func (s *Store) updateEntry(ctx context.Context, ns string, f func(v *entryValue) error) (entryValue, error) {
	for attempt := 0; ; attempt++ {
		v, se, err := s.n.getEntry(ctx, ns)
		if err != nil {
			return entryValue{}, err
		}
		if err := f(&v); err != nil {
			return entryValue{}, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return entryValue{}, err
		}
		stale := false
		err = s.n.op(ctx, "changing a namespace entry", func(ctx context.Context, r *resources) error {
			_, err := r.entries.Update(ctx, ns, b, se.Revision)
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				stale = true
				return nil
			}
			return err
		})
		if err != nil {
			return entryValue{}, err
		}
		if !stale {
			s.remember(ns, v.entry(ns))
			return v, nil
		}
		if attempt == 8 {
			return entryValue{}, fmt.Errorf("%w: the entry of %s kept changing", persistence.ErrUnavailable, ns)
		}
	}
}

// Relabel changes the name and labels of an active entry.
func (s *Store) Relabel(ctx context.Context, owner, ns string, change persistence.EntryChange) (persistence.Entry, error) {
	if change.Name != nil {
		if err := persistence.CheckEntryName(*change.Name); err != nil {
			return persistence.Entry{}, err
		}
	}
	if change.Labels != nil {
		if err := persistence.CheckLabels(*change.Labels); err != nil {
			return persistence.Entry{}, err
		}
	}
	var oldName string
	v, err := s.updateEntry(ctx, ns, func(v *entryValue) error {
		if v.Owner != owner || v.State != persistence.StateActive {
			return persistence.ErrNotFound
		}
		oldName = v.Name
		if change.Name != nil && *change.Name != v.Name {
			if *change.Name != "" {
				if err := s.claimName(ctx, owner, *change.Name, ns); err != nil {
					return err
				}
			}
			v.Name = *change.Name
		}
		if change.Labels != nil {
			v.Labels = nil
			if len(*change.Labels) > 0 {
				v.Labels = *change.Labels
			}
		}
		return nil
	})
	if err != nil {
		return persistence.Entry{}, err
	}
	if oldName != "" && oldName != v.Name {
		s.releaseName(ctx, owner, oldName, ns)
	}
	return v.entry(ns), nil
}

// ClaimDelete makes the entry a tombstone if its revision is still prev's, and frees its
// name (registry.NamespaceLog).
func (l *nsLog) ClaimDelete(ctx context.Context, prev registry.MetaState) error {
	var name string
	err := l.n.op(ctx, "deleting a namespace entry", func(ctx context.Context, r *resources) error {
		cur, se, err := l.n.getEntry(ctx, l.ns)
		if err != nil {
			return err
		}
		if cur.State == persistence.StateDeleted {
			return persistence.ErrNotFound
		}
		if se.Revision != prev.Revision {
			return fmt.Errorf("%w: another node changed it first", registry.ErrConflict)
		}
		name = cur.Name
		b, err := json.Marshal(tombstone(cur))
		if err != nil {
			return err
		}
		_, err = r.entries.Update(ctx, l.ns, b, prev.Revision)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("%w: another node changed it first", registry.ErrConflict)
		}
		return err
	})
	if err == nil && name != "" {
		l.n.releaseName(ctx, l.owner, name, l.ns)
	}
	return err
}

// RemoveBefore purges the namespace's records before seq and deletes its snapshot and its
// versions (registry.NamespaceLog). A delete interrupted before it is completed by the
// next delete of the namespace (FinishDelete), which calls it again.
func (l *nsLog) RemoveBefore(ctx context.Context, seq uint64) error {
	err := l.n.op(ctx, "removing a deleted namespace's log and snapshot", func(ctx context.Context, r *resources) error {
		if err := l.stream.Purge(ctx, jetstream.WithPurgeSubject(l.subject), jetstream.WithPurgeSequence(seq)); err != nil {
			return err
		}
		err := r.snaps.Delete(ctx, l.ns)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return clusterVersions{l.n}.DeleteVersions(ctx, l.ns)
}

var _ registry.DeleteFinisher = (*Node)(nil)

// FinishDelete completes the delete of (owner, ns) if it was interrupted after its
// tombstone (registry.DeleteFinisher): unless the namespace's log ends with a deletion
// record, one is published — every node that still has the namespace loaded closes it —
// then the records before it and the snapshot are removed. A namespace that is not a
// tombstone of owner is left alone (persistence.ErrNotFound).
func (n *Node) FinishDelete(ctx context.Context, owner, ns string) error {
	v, _, err := n.getEntry(ctx, ns)
	if err != nil {
		return err
	}
	if v.Owner != owner || v.State != persistence.StateDeleted {
		return persistence.ErrNotFound
	}
	stream, err := n.logStream(ctx, v.Log)
	if err != nil {
		return err
	}
	subject := logSubjectIn(v.Log, owner, ns)
	var seq uint64
	err = n.op(ctx, "finishing a namespace's delete", func(ctx context.Context, r *resources) error {
		last, err := stream.GetLastMsgForSubject(ctx, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return err
		default:
			if rec, _, derr := decodeRecord(last.Data); derr == nil && rec.Kind == registry.RecordDeleted {
				seq = last.Sequence
				return nil
			}
		}
		// Its own message id: the first deletion record may still be in the stream's window
		// of duplicates, with records after it.
		data := encodeRecord(registry.Record{Kind: registry.RecordDeleted}, n.incarnation)
		ack, err := n.js.Publish(ctx, subject, data, jetstream.WithMsgID(fmt.Sprintf("%s%s-%s-%d", deletedIDPrefix, ns, n.incarnation, n.cfg.Clock.Now().UnixNano())))
		if err != nil {
			return err
		}
		seq = ack.Sequence
		return nil
	})
	if err != nil {
		return err
	}
	l := &nsLog{n: n, owner: owner, ns: ns, subject: subject, stream: stream, streamNm: logStreamName(v.Log)}
	return l.RemoveBefore(ctx, seq)
}

// tombstone is what stays of a deleted namespace's entry: its owner, creation time and
// meta record (so the id is never created again), nothing of its document.
func tombstone(v entryValue) entryValue {
	return entryValue{Owner: v.Owner, State: persistence.StateDeleted, CreatedAt: v.CreatedAt, Gen: v.Gen, Epoch: v.Epoch, Log: v.Log}
}

// DeleteEntry makes the entry a tombstone and removes the namespace's log and snapshot.
func (s *Store) DeleteEntry(ctx context.Context, owner, ns string) error {
	var name string
	var log int
	_, err := s.updateEntry(ctx, ns, func(v *entryValue) error {
		if v.Owner != owner || v.State == persistence.StateDeleted {
			return persistence.ErrNotFound
		}
		name, log = v.Name, v.Log
		*v = tombstone(*v)
		return nil
	})
	if err != nil {
		return err
	}
	if name != "" {
		s.releaseName(ctx, owner, name, ns)
	}
	return s.n.removeDocument(ctx, owner, ns, log)
}

// removeDocument purges the namespace's log subject and deletes its snapshot object.
func (n *Node) removeDocument(ctx context.Context, owner, ns string, log int) error {
	stream, err := n.logStream(ctx, log)
	if err != nil {
		return err
	}
	return n.op(ctx, "removing a deleted namespace's log and snapshot", func(ctx context.Context, r *resources) error {
		if err := stream.Purge(ctx, jetstream.WithPurgeSubject(logSubjectIn(log, owner, ns))); err != nil {
			return err
		}
		err := r.snaps.Delete(ctx, ns)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil
		}
		return err
	})
}
