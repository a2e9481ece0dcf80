package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/persistence"
)

// Compaction keeps each namespace log bounded. The node that sees the log grow past
// Config.CompactAfterRecords or CompactAfterBytes since the last snapshot it knows of —
// and, for a document whose snapshot is over compactRatioFloor, past a
// compactSnapshotRatio-th of the snapshot's bytes — tries to take the namespace's compaction lease (a key in LeasesBucket, created only if
// absent, expiring after Config.LeaseTTL): at most one node compacts a namespace at a
// time. The holder
//
//  1. takes a snapshot of its document as applied through position S (in a sequencer
//     slot: exactly the log through S);
//  2. writes it to SnapshotBucket tagged with S, its meta generation, and the purge floor
//     F = the previous snapshot's S (the log keeps one snapshot interval of history, so a
//     node that loaded the previous snapshot a moment ago still finds its records);
//  3. renews the lease by compare-and-set (a holder that lost it stops here);
//  4. purges the namespace's subject through min(F, every node's acknowledged position),
//     so no follower loses a record it has not read yet;
//  5. gives the lease back.
//
// A follower that was not reading when a purge ran (its consumer was being recreated)
// finds, after recreating it, a floor past its position and takes the snapshot instead of
// the records it can no longer read (registry.RecordSnapshot).

// A compaction encodes the whole document, in the namespace's sequencer (the applies of the
// log wait behind it): its cost grows with the document while the records between two of
// them stay as many. So a large document is compacted only once the log since its snapshot
// holds a quarter of the snapshot's bytes too — encoding it then costs at most a fixed share
// of what the writes cost, as in a single hub's store (persistence.DefaultCompactSnapshotRatio)
// — and a log stays within a few times its document's size. A small document (up to
// compactRatioFloor) is compacted by the counts alone: its encoding is cheap.
const (
	compactSnapshotRatio = 4
	compactRatioFloor    = 64 << 10
)

// noteApplied counts what the follower handed on and starts a compaction when due
// (follower goroutine).
func (l *nsLog) noteApplied(records, bytes int) {
	l.sinceRecords += records
	l.sinceBytes += bytes
	cfg := &l.n.cfg
	if l.sinceRecords < cfg.CompactAfterRecords && l.sinceBytes < cfg.CompactAfterBytes {
		return
	}
	if sb := l.snapBytes.Load(); sb > compactRatioFloor && int64(l.sinceBytes)*compactSnapshotRatio < sb {
		return
	}
	if !l.compacting.CompareAndSwap(false, true) {
		return
	}
	since := int64(l.sinceBytes)
	l.sinceRecords, l.sinceBytes = 0, 0
	l.compactions.Add(1)
	go func() {
		defer l.compactions.Done()
		defer l.compacting.Store(false)
		l.compact(since)
	}()
}

// compact runs one compaction under the lease; since is the log's bytes that made it due.
// The newest snapshot, which another node may have written, is read first: when it is
// larger than this node knew and the log since is too small for it (the ratio above), the
// compaction is put off — it comes again, at the latest, once that many bytes more are
// handed on.
func (l *nsLog) compact(since int64) {
	m := l.n.metrics
	ctx, cancel := context.WithTimeout(l.ctx, 4*l.n.cfg.OpTimeout)
	defer cancel()
	key := "compact." + l.ns
	holder := []byte(l.n.cfg.NodeName)
	rev, err := l.res.leases.Create(ctx, key, holder)
	if errors.Is(err, jetstream.ErrKeyExists) {
		m.compactions.WithLabelValues("leased-elsewhere").Inc()
		return
	}
	if err != nil {
		l.compactFailed("taking the compaction lease", err)
		return
	}
	m.leasesHeld.Inc()
	defer func() {
		m.leasesHeld.Dec()
		dctx, dcancel := context.WithTimeout(context.Background(), l.n.cfg.OpTimeout)
		defer dcancel()
		_ = l.res.leases.Delete(dctx, key, jetstream.LastRevision(rev))
	}()

	var prev uint64
	info, err := l.n.snapshotInfo(ctx, l.ns)
	switch {
	case err != nil:
		l.compactFailed("reading the previous snapshot", err)
		return
	case info != nil:
		if prev, _, _, err = snapshotMeta(info); err != nil {
			l.compactFailed("reading the previous snapshot", err)
			return
		}
		if size := int64(info.Size); size > l.snapBytes.Load() {
			l.snapBytes.Store(size)
			if size > compactRatioFloor && since*compactSnapshotRatio < size {
				m.compactions.WithLabelValues("put-off").Inc()
				return
			}
		}
	}
	snap, err := l.host.Snapshot(ctx)
	if err != nil {
		l.compactFailed("taking a snapshot", err)
		return
	}
	if snap.Through <= prev {
		m.compactions.WithLabelValues("up-to-date").Inc()
		return
	}
	floor := prev
	meta := jetstream.ObjectMeta{Name: l.ns, Metadata: map[string]string{
		metaThrough: strconv.FormatUint(snap.Through, 10),
		metaGen:     strconv.FormatUint(snap.MetaGen, 10),
		metaFloor:   strconv.FormatUint(floor, 10),
	}}
	if _, err := l.res.snaps.Put(ctx, meta, bytes.NewReader(snap.Doc)); err != nil {
		l.compactFailed("writing the snapshot", err)
		return
	}
	l.snapBytes.Store(int64(len(snap.Doc)))
	// A delete on another node may have removed the snapshots before this one was written:
	// the entry, a tombstone by then, says so, and this one goes too.
	if v, _, err := l.n.getEntry(ctx, l.ns); err == nil && v.State == persistence.StateDeleted {
		_ = l.res.snaps.Delete(ctx, l.ns)
		return
	}
	if rev, err = l.res.leases.Update(ctx, key, holder, rev); err != nil {
		l.compactFailed("renewing the compaction lease", err)
		return
	}
	purge := floor
	if purge > 0 {
		nodes, err := l.n.nodeNames(ctx)
		if err != nil {
			l.compactFailed("listing the nodes", err)
			return
		}
		for _, node := range nodes {
			c, err := l.stream.Consumer(ctx, consumerName(node, l.ns))
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				continue
			}
			if err != nil {
				l.compactFailed("reading a node's position", err)
				return
			}
			purge = min(purge, c.CachedInfo().AckFloor.Stream)
		}
	}
	if purge > 0 {
		err := l.stream.Purge(ctx, jetstream.WithPurgeSubject(l.subject), jetstream.WithPurgeSequence(purge+1))
		if err != nil {
			l.compactFailed("purging the log", err)
			return
		}
	}
	m.compactionDone()
	l.n.log.Debug("namespace log compacted", slog.String("namespaceId", l.ns),
		slog.Uint64("snapshotThrough", snap.Through), slog.Uint64("purgedThrough", purge), slog.Int("snapshotBytes", len(snap.Doc)))
}

func (l *nsLog) compactFailed(what string, err error) {
	if l.ctx.Err() != nil {
		return
	}
	l.n.metrics.compactions.WithLabelValues("failed").Inc()
	l.n.log.Warn("compacting a namespace log failed; the next one retries", slog.String("namespaceId", l.ns),
		slog.String("error", classify(what, l.n.cfg.OpTimeout, err).Error()))
}

// nodeNames lists the names in NodesBucket: the subjects of the bucket's stream, in one
// request to its leader (the bucket's Keys creates and deletes a consumer — two proposals
// to the JetStream meta layer — at every call; compaction and the check for older nodes
// list the nodes often). A node whose entry was deleted may still be listed: its entry and
// its consumers are then not found, which both callers skip.
func (n *Node) nodeNames(ctx context.Context) ([]string, error) {
	prefix := "$KV." + NodesBucket + "."
	req, _ := json.Marshal(map[string]string{"subjects_filter": prefix + ">"})
	msg, err := n.nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO.KV_"+NodesBucket, req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Error *apiError `json:"error"`
		Total int       `json:"total"`
		State struct {
			Subjects map[string]uint64 `json:"subjects"`
		} `json:"state"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	if resp.Error != nil {
		return nil, resp.Error.err()
	}
	if resp.Total > len(resp.State.Subjects) {
		return nil, fmt.Errorf("listing the nodes: %d of %d names in one answer", len(resp.State.Subjects), resp.Total)
	}
	names := make([]string, 0, len(resp.State.Subjects))
	for s := range resp.State.Subjects {
		if name, ok := strings.CutPrefix(s, prefix); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
