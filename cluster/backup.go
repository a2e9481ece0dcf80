package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/backup"
	"github.com/nomicore/nomicore/persistence"
)

// A backup of a hub cluster, taken from any node, and its restore into a new cluster.
//
// The backup (package backup's kind "cluster") holds what the cluster keeps in JetStream:
// the log position when it began (KindCluster); for each namespace its entry as kept in
// EntriesBucket (with its first document and its meta record), its newest snapshot with the
// position and meta generation it covers, and every record of its log after that snapshot
// (KindNamespace, KindSnapshot, KindRecord), and the states of its saved versions
// (KindVersion; their descriptions are keys of the configuration map); and the
// configuration map (KindConfig). Each
// namespace is read consistently — its snapshot, then its log through the head read after
// the snapshot, then its entry, again if a compaction purged part of what was read, then
// its versions' states — and the namespaces one after the other, so the backup holds each namespace as it was at some
// moment while the backup ran. Node names and compaction leases are not kept: a new cluster
// has its own.
//
// Restore loads such a backup into a cluster that holds no namespace yet, from one node:
// each namespace's snapshot is tagged with the log position reached before its records are
// published again, in their order, so that every node replays them as the old cluster did;
// its entry is created last, so that the namespace does not exist for peers until it is
// whole. A key of the configuration map marks a restore in progress: an interrupted one is
// refused, not merged.

// backupCluster is the KindCluster section.
type backupCluster struct {
	LogPosition uint64 `json:"logPosition"`
	Replicas    int    `json:"replicas"`
}

// backupNamespace is a KindNamespace section; its snapshot (if any) and records follow.
type backupNamespace struct {
	NamespaceID string          `json:"namespaceId"`
	Owner       string          `json:"owner"`
	Entry       json.RawMessage `json:"entry"` // as kept in EntriesBucket
	// SnapshotThrough and SnapshotGen tag the snapshot section that follows, if
	// HasSnapshot: the log position it covers and the meta generation it includes.
	HasSnapshot     bool   `json:"hasSnapshot"`
	SnapshotThrough uint64 `json:"snapshotThrough,omitempty"`
	SnapshotGen     uint64 `json:"snapshotGen,omitempty"`
	Head            uint64 `json:"head"`    // the newest record read
	Records         int    `json:"records"` // KindRecord sections that follow
}

// backupConfig is a KindConfig section.
type backupConfig struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// nsCopy is one namespace as read for a backup.
type nsCopy struct {
	head    backupNamespace
	snap    []byte
	records []backupRecord
}

type backupRecord struct {
	seq  uint64
	data []byte
}

// Backup writes the cluster's state to bw, section by section (see above). It needs the
// node's resources; it reads from the streams' leaders.
func (n *Node) Backup(ctx context.Context, bw *backup.Writer) error {
	res, err := n.resources(ctx)
	if err != nil {
		return err
	}
	var position uint64
	err = n.read(ctx, "reading the log position", func(ctx context.Context, r *resources) error {
		info, err := r.stream.Info(ctx)
		if err == nil {
			position = info.State.LastSeq
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := bw.JSON(backup.KindCluster, backupCluster{LogPosition: position, Replicas: n.cfg.Replicas}); err != nil {
		return err
	}
	var ids []string
	err = n.read(ctx, "listing the namespaces", func(ctx context.Context, r *resources) error {
		ids = ids[:0]
		l, err := r.entries.ListKeys(ctx)
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		if err != nil {
			return err
		}
		defer l.Stop()
		for k := range l.Keys() {
			ids = append(ids, k)
		}
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	sort.Strings(ids)
	for _, ns := range ids {
		c, err := n.copyNamespace(ctx, res, ns)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return fmt.Errorf("backing up %s: %w", ns, err)
		}
		if err := bw.JSON(backup.KindNamespace, c.head); err != nil {
			return err
		}
		if c.head.HasSnapshot {
			if err := bw.Bytes(backup.KindSnapshot, c.snap); err != nil {
				return err
			}
		}
		for _, rec := range c.records {
			if err := bw.Bytes(backup.KindRecord, append(binary.BigEndian.AppendUint64(nil, rec.seq), rec.data...)); err != nil {
				return err
			}
		}
		if err := n.backupVersions(ctx, bw, ns); err != nil {
			return fmt.Errorf("backing up the versions of %s: %w", ns, err)
		}
	}
	return n.backupConfig(ctx, bw)
}

// backupVersions writes the state of each saved version of ns (a version deleted while the
// backup runs is left out; its description, if the configuration map still has it when it
// is read, is restored without a state and reads as not found, as after a delete).
func (n *Node) backupVersions(ctx context.Context, bw *backup.Writer, ns string) error {
	vs := n.Versions()
	list, err := vs.Versions(ctx, ns)
	if err != nil {
		return err
	}
	for _, v := range list {
		_, state, err := vs.VersionState(ctx, ns, v.ID)
		if errors.Is(err, persistence.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := bw.Bytes(backup.KindVersion, append(binary.BigEndian.AppendUint64(nil, v.ID), state...)); err != nil {
			return err
		}
	}
	return nil
}

// errGone: a namespace listed a moment ago has no entry any more.
var errGone = errors.New("cluster: the namespace is gone")

// copyNamespace reads one namespace: its snapshot, its log after it through the head, its
// entry; again when a compaction purged records meanwhile.
func (n *Node) copyNamespace(ctx context.Context, res *resources, ns string) (nsCopy, error) {
	for attempt := 0; ; attempt++ {
		v, _, err := n.getEntry(ctx, ns)
		if errors.Is(err, persistence.ErrNotFound) {
			return nsCopy{}, errGone
		}
		if err != nil {
			return nsCopy{}, err
		}
		stream, err := n.logStream(ctx, v.Log)
		if err != nil {
			return nsCopy{}, err
		}
		l := &nsLog{n: n, res: res, stream: stream, streamNm: logStreamName(v.Log), owner: v.Owner, ns: ns,
			subject: logSubjectIn(v.Log, v.Owner, ns)}
		snap, found, err := l.readSnapshot(ctx)
		if err != nil {
			return nsCopy{}, err
		}
		head, err := l.Head(ctx)
		if err != nil {
			return nsCopy{}, err
		}
		var records []backupRecord
		if head > snap.Through {
			if records, err = n.readLog(ctx, l.stream, l.subject, snap.Through+1, head); err != nil {
				return nsCopy{}, err
			}
		}
		// The entry last: a meta change claimed meanwhile is in it (and completed by the new
		// cluster's next change, as after a node's death).
		_, se, err := n.getEntry(ctx, ns)
		if err != nil {
			return nsCopy{}, err
		}
		// A compaction purges only what an earlier snapshot covers; if one purged past the
		// snapshot read here while the log was read, records may be missing: read again.
		floor, err := l.snapshotFloor(ctx)
		if err != nil {
			return nsCopy{}, err
		}
		if floor > snap.Through && attempt < 3 {
			continue
		}
		if floor > snap.Through {
			return nsCopy{}, errors.New("the namespace's log is compacted faster than it can be read")
		}
		c := nsCopy{head: backupNamespace{NamespaceID: ns, Owner: v.Owner, Entry: se.Value, HasSnapshot: found, Head: head,
			Records: len(records)}, records: records}
		if found {
			c.head.SnapshotThrough, c.head.SnapshotGen, c.snap = snap.Through, snap.MetaGen, snap.Doc
		}
		return c, nil
	}
}

// readLog reads the records of subject from position from through head, in order; again,
// from the start, while nobody answers a request of the read (the consumer just made may
// not be known yet where the pull request goes), for up to ten operation timeouts.
func (n *Node) readLog(ctx context.Context, stream jetstream.Stream, subject string, from, head uint64) ([]backupRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*n.cfg.OpTimeout)
	defer cancel()
	var out []backupRecord
	err := retryUnanswered(ctx, func() error {
		var err error
		out, err = n.readLogOnce(ctx, stream, subject, from, head)
		return err
	})
	return out, err
}

// readLogOnce is one attempt of readLog, through an ordered consumer of its own.
func (n *Node) readLogOnce(ctx context.Context, stream jetstream.Stream, subject string, from, head uint64) ([]backupRecord, error) {
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return nil, classify("reading a namespace log", n.cfg.OpTimeout, err)
	}
	var out []backupRecord
	for {
		done, got, err := n.fetchLog(ctx, cons, head, &out)
		if err != nil || done {
			return out, err
		}
		if got == 0 {
			return nil, fmt.Errorf("the log ended at %d records before position %d", len(out), head)
		}
	}
}

// fetchLog reads one batch of cons into out: done once it reached head. The batch's request
// ends with the call (its context), so that no fetch outlives a read that stopped at head
// before the batch was full.
func (n *Node) fetchLog(ctx context.Context, cons jetstream.Consumer, head uint64, out *[]backupRecord) (done bool, got int, err error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.OpTimeout)
	defer cancel()
	batch, err := cons.Fetch(followBatch, jetstream.FetchContext(ctx))
	if err != nil {
		return false, 0, classify("reading a namespace log", n.cfg.OpTimeout, err)
	}
	for m := range batch.Messages() {
		got++
		md, err := m.Metadata()
		if err != nil {
			return false, got, err
		}
		if md.Sequence.Stream > head {
			return true, got, nil
		}
		*out = append(*out, backupRecord{seq: md.Sequence.Stream, data: bytes.Clone(m.Data())})
		if md.Sequence.Stream == head {
			return true, got, nil
		}
	}
	if err := batch.Error(); err != nil && !(got > 0 && errors.Is(err, context.DeadlineExceeded)) {
		return false, got, classify("reading a namespace log", n.cfg.OpTimeout, err)
	}
	return false, got, nil
}

// backupConfig writes every key of the configuration map.
func (n *Node) backupConfig(ctx context.Context, bw *backup.Writer) error {
	store := n.Store()
	keys, err := store.ConfigKeys(ctx, "")
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k == restoreMarker {
			continue
		}
		v, err := store.Config(ctx, k)
		if err != nil {
			return err
		}
		if err := bw.JSON(backup.KindConfig, backupConfig{Key: k, Value: v}); err != nil {
			return err
		}
	}
	return nil
}

// restoreMarker is the configuration key that marks a restore in progress.
const restoreMarker = "nomicore/restore-in-progress"

// ErrNotEmpty: Restore into a cluster that holds namespaces already.
var ErrNotEmpty = errors.New("cluster: the cluster holds namespaces already")

// Restore loads a cluster backup read from r into this node's cluster, which must hold no
// namespace yet. It waits (bounded by ctx) for the cluster's streams and quorum, and
// returns how many namespaces it loaded.
func (n *Node) Restore(ctx context.Context, r *backup.Reader, log *slog.Logger) (int, error) {
	if h := r.Header(); h.Kind != backup.KindHubCluster {
		return 0, fmt.Errorf("a backup of a %s, not of a hub cluster", h.Kind)
	}
	res, err := n.resources(ctx)
	if err != nil {
		return 0, err
	}
	for !n.Healthy() {
		if !n.sleep(200 * time.Millisecond) {
			return 0, errors.New("the node closed")
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("no cluster quorum to load the backup into: %w", ctx.Err())
		}
	}
	empty := true
	err = n.op(ctx, "checking that the cluster is empty", func(ctx context.Context, r *resources) error {
		l, err := r.entries.ListKeys(ctx)
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		if err != nil {
			return err
		}
		defer l.Stop()
		for range l.Keys() {
			empty = false
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	marker := configKey(restoreMarker)
	if _, err := res.config.Get(ctx, marker); err == nil {
		return 0, errors.New("an earlier restore into this cluster was interrupted: stop every node, empty their data " +
			"directories (the cluster's JetStream files), and restore again")
	}
	if !empty {
		return 0, fmt.Errorf("%w: a backup is loaded into a new, empty cluster only (every node with an empty data directory)", ErrNotEmpty)
	}
	if _, err := res.config.Create(ctx, marker, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return 0, classify("marking the restore", n.cfg.OpTimeout, err)
	}
	loaded := 0
	var cur *backupNamespace
	var snap []byte
	var records [][]byte
	var versions []backupVersion
	finish := func() error {
		if cur == nil {
			return nil
		}
		if err := n.restoreNamespace(ctx, res, cur, snap, records, versions); err != nil {
			return fmt.Errorf("restoring %s: %w", cur.NamespaceID, err)
		}
		loaded++
		if loaded%100 == 0 {
			log.Info("restoring the cluster from a backup", slog.Int("namespaces", loaded))
		}
		cur, snap, records, versions = nil, nil, nil, nil
		return nil
	}
	store := n.Store()
	for {
		kind, size, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return loaded, err
		}
		switch kind {
		case backup.KindNamespace, backup.KindConfig:
			if err := finish(); err != nil {
				return loaded, err
			}
		}
		switch kind {
		case backup.KindNamespace:
			b, err := r.ReadAll(size)
			if err != nil {
				return loaded, err
			}
			cur = &backupNamespace{}
			if err := json.Unmarshal(b, cur); err != nil {
				return loaded, fmt.Errorf("a namespace of the backup does not parse: %v", err)
			}
		case backup.KindSnapshot:
			if cur == nil || !cur.HasSnapshot {
				return loaded, errors.New("a snapshot outside a namespace in the backup")
			}
			if size > maxSnapshotBytes {
				return loaded, fmt.Errorf("a snapshot of %d bytes", size)
			}
			if snap, err = r.ReadAll(size); err != nil {
				return loaded, err
			}
		case backup.KindRecord:
			if cur == nil || size < 8 {
				return loaded, errors.New("a record outside a namespace in the backup")
			}
			b, err := r.ReadAll(size)
			if err != nil {
				return loaded, err
			}
			records = append(records, b[8:])
		case backup.KindVersion:
			if cur == nil || size < 8 {
				return loaded, errors.New("a version outside a namespace in the backup")
			}
			if size-8 > maxSnapshotBytes {
				return loaded, fmt.Errorf("a version of %d bytes", size-8)
			}
			b, err := r.ReadAll(size)
			if err != nil {
				return loaded, err
			}
			versions = append(versions, backupVersion{id: binary.BigEndian.Uint64(b), state: b[8:]})
		case backup.KindConfig:
			b, err := r.ReadAll(size)
			if err != nil {
				return loaded, err
			}
			var c backupConfig
			if err := json.Unmarshal(b, &c); err != nil {
				return loaded, fmt.Errorf("a configuration key of the backup does not parse: %v", err)
			}
			if err := store.PutConfig(ctx, c.Key, c.Value); err != nil {
				return loaded, err
			}
		}
	}
	if err := finish(); err != nil {
		return loaded, err
	}
	if err := res.config.Delete(ctx, marker); err != nil {
		return loaded, classify("clearing the restore's mark", n.cfg.OpTimeout, err)
	}
	return loaded, nil
}

// backupVersion is a KindVersion section: a saved version's id and state.
type backupVersion struct {
	id    uint64
	state []byte
}

// restoreNamespace loads one namespace: its snapshot tagged with the log's position now,
// its records published again after it, in order, its versions' states, then its entry.
// (The versions' descriptions come with the configuration map, after every namespace: a
// description is never there before its state.)
func (n *Node) restoreNamespace(ctx context.Context, res *resources, ns *backupNamespace, snap []byte, records [][]byte, versions []backupVersion) error {
	if len(records) != ns.Records || ns.HasSnapshot && snap == nil {
		return fmt.Errorf("the backup holds %d of its %d records", len(records), ns.Records)
	}
	var v entryValue
	if err := json.Unmarshal(ns.Entry, &v); err != nil || v.Owner != ns.Owner {
		return fmt.Errorf("its entry does not parse")
	}
	// The log goes into the stream the entry names (one stream, NOMICORE_LOG, unless the
	// cluster was configured with more).
	stream, err := n.logStream(ctx, v.Log)
	if err != nil {
		return err
	}
	subject := logSubjectIn(v.Log, ns.Owner, ns.NamespaceID)
	if ns.HasSnapshot {
		var position uint64
		err := n.op(ctx, "reading the log position", func(ctx context.Context, r *resources) error {
			info, err := stream.Info(ctx)
			if err == nil {
				position = info.State.LastSeq
			}
			return err
		})
		if err != nil {
			return err
		}
		meta := jetstream.ObjectMeta{Name: ns.NamespaceID, Metadata: map[string]string{
			metaThrough: strconv.FormatUint(position, 10),
			metaGen:     strconv.FormatUint(ns.SnapshotGen, 10),
			metaFloor:   "0",
		}}
		if _, err := res.snaps.Put(ctx, meta, bytes.NewReader(snap)); err != nil {
			return classify("writing a snapshot", n.cfg.OpTimeout, err)
		}
	}
	for _, rec := range records {
		m := nats.NewMsg(subject)
		m.Data = rec
		err := retryUnanswered(ctx, func() error {
			_, err := n.js.PublishMsg(ctx, m, jetstream.WithExpectStream(logStreamName(v.Log)))
			return classify("publishing a record", n.cfg.OpTimeout, err)
		})
		if err != nil {
			return err
		}
	}
	for _, v := range versions {
		err := n.op(ctx, "restoring a version", func(ctx context.Context, r *resources) error {
			_, err := r.snaps.Put(ctx, jetstream.ObjectMeta{Name: versionObject(ns.NamespaceID, v.id)}, bytes.NewReader(v.state))
			return err
		})
		if err != nil {
			return err
		}
	}
	return n.op(ctx, "creating the namespace's entry", func(ctx context.Context, r *resources) error {
		_, err := r.entries.Create(ctx, ns.NamespaceID, ns.Entry)
		return err
	})
}
