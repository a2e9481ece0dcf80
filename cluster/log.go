package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// Snapshot object metadata (SnapshotBucket, one object per namespace id).
const (
	metaThrough = "through" // the last log position the snapshot covers
	metaGen     = "gen"     // the meta generation it includes
	metaFloor   = "floor"   // the log may be purged through this position once it is written
	// maxSnapshotBytes bounds a snapshot read back (it is the cluster's own data; the bound
	// keeps a damaged object from exhausting memory).
	maxSnapshotBytes = 1 << 30
)

// Following a namespace log.
const (
	followBatch      = 256                   // records asked for at a time
	ackEvery         = 64                    // acknowledge (AckAll) at least every this many messages,
	ackIdle          = 50 * time.Millisecond // and at most this long after a message was handed on
	followHeartbeat  = time.Second
	followExpiry     = 5 * time.Second
	consumerIdle     = time.Minute // an abandoned consumer is removed after this
	maxFollowBackoff = 2 * time.Second
	pullCheckEvery   = 20 * time.Millisecond // confirmPull
	pullChecks       = 10
	consumerAttempt  = time.Second // createConsumer
)

// nsLog is one namespace's log as this node follows it (registry.NamespaceLog). One
// goroutine (follow) reads the records with a pull consumer named after the node and the
// namespace, in log order, and hands them to the registry; it checks the consumer's
// delivery sequence for gaps and starts over from the last record it handed on after any
// error. It acknowledges what it handed on (AckAll), which is how compaction knows how far
// each node has read: every ackEvery messages, and at most ackIdle after a message was
// handed on — not after every message, whose acknowledgement is one more message for the
// consumer's server to take while the next write waits (compaction needs the position
// soon, not at once).
type nsLog struct {
	n        *Node
	res      *resources
	stream   jetstream.Stream // the log stream holding the namespace's log
	streamNm string           // its name
	owner    string
	ns       string
	subject  string
	consumer string
	host     registry.LogHost
	start    registry.LogStart

	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	started atomic.Bool
	once    sync.Once

	lag         atomic.Uint64  // records after the last one handed on (from the last delivery)
	snapBytes   atomic.Int64   // the size of the newest snapshot this node read or wrote
	compacting  atomic.Bool    // a compaction of this node is running
	compactions sync.WaitGroup // the running compaction

	// Owned by the follower goroutine: what was handed on since the last compaction check.
	sinceRecords, sinceBytes int
}

var _ registry.NamespaceLog = (*nsLog)(nil)

// consumerName is the name of a node's consumer of a namespace log.
func consumerName(node, ns string) string { return "nmcr_" + node + "_" + ns }

// OpenLog opens a namespace's log: the newest snapshot (or the first document, from the
// entry) and the log's head (registry.SharedLog).
func (n *Node) OpenLog(ctx context.Context, owner, ns string, host registry.LogHost) (registry.NamespaceLog, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*n.cfg.OpTimeout)
	defer cancel()
	res, err := n.resources(ctx)
	if err != nil {
		return nil, err
	}
	k, err := n.logStreamOf(ctx, ns)
	if err != nil {
		return nil, err
	}
	stream, err := n.logStream(ctx, k)
	if err != nil {
		return nil, err
	}
	l := &nsLog{n: n, res: res, stream: stream, streamNm: logStreamName(k), owner: owner, ns: ns, subject: logSubjectIn(k, owner, ns),
		consumer: consumerName(n.cfg.NodeName, ns), host: host, done: make(chan struct{})}
	if l.start, err = l.readStart(ctx); err != nil {
		return nil, err
	}
	l.snapBytes.Store(int64(len(l.start.Doc)))
	if l.start.Head, err = l.Head(ctx); err != nil {
		return nil, err
	}
	l.ctx, l.cancel = context.WithCancel(n.life)
	n.logsMu.Lock()
	n.logs[l] = struct{}{}
	n.logsMu.Unlock()
	return l, nil
}

// readStart reads where the document starts: the snapshot, else the entry's first
// document.
func (l *nsLog) readStart(ctx context.Context) (registry.LogStart, error) {
	snap, ok, err := l.readSnapshot(ctx)
	if err != nil || ok {
		return snap, err
	}
	v, err := l.n.openEntry(ctx, l.ns)
	if err != nil {
		return registry.LogStart{}, err
	}
	if v.Owner != l.owner {
		return registry.LogStart{}, persistence.ErrNotFound
	}
	return registry.LogStart{Doc: v.Genesis}, nil
}

// readSnapshot reads the namespace's snapshot, if there is one. A snapshot replaced while
// it is being read loses its chunks under the reader, which then waits for nothing: each
// attempt has its own deadline, and the next one reads the new snapshot.
func (l *nsLog) readSnapshot(ctx context.Context) (registry.LogStart, bool, error) {
	for attempt := 0; ; attempt++ {
		var st registry.LogStart
		found := false
		actx, cancel := context.WithTimeout(ctx, l.n.cfg.OpTimeout)
		err := retryUnanswered(actx, func() error {
			st, found = registry.LogStart{}, false
			return classify("reading a snapshot", l.n.cfg.OpTimeout, l.getSnapshot(actx, &st, &found))
		})
		cancel()
		if err == nil || attempt == 2 || ctx.Err() != nil {
			return st, found, err
		}
	}
}

// getSnapshot reads the snapshot object into st: its description as the bucket's leader
// has it (or a replica while the leader does not answer), its chunks from any copy of the
// bucket (direct gets) — no consumer to create, no leader to wait for (replica.go). A
// copy that lacks a chunk — the snapshot was replaced meanwhile, or the copy is behind —
// fails the attempt.
func (l *nsLog) getSnapshot(ctx context.Context, st *registry.LogStart, found *bool) error {
	info, err := l.n.snapshotInfoNow(ctx, l.ns)
	if err != nil || info == nil {
		return err
	}
	if st.Through, st.MetaGen, _, err = snapshotMeta(info); err != nil {
		return err
	}
	if info.Size > maxSnapshotBytes {
		return fmt.Errorf("snapshot of %d bytes exceeds %d", info.Size, maxSnapshotBytes)
	}
	if st.Doc, err = l.n.readChunks(ctx, info); err != nil {
		return err
	}
	*found = true
	return nil
}

// readChunks reads the chunks of a snapshot object in order from any copy of the bucket,
// and checks them against the object's size and digest.
func (n *Node) readChunks(ctx context.Context, info *jetstream.ObjectInfo) ([]byte, error) {
	want, err := jetstream.DecodeObjectDigest(info.Digest)
	if err != nil {
		return nil, fmt.Errorf("a snapshot's description: %w", err)
	}
	subject := "$O." + SnapshotBucket + ".C." + info.NUID
	doc := make([]byte, 0, info.Size)
	next := uint64(1)
	for range info.Chunks {
		req, _ := json.Marshal(map[string]any{"seq": next, "next_by_subj": subject})
		msg, err := n.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.OBJ_"+SnapshotBucket, req)
		if err != nil {
			return nil, err
		}
		if status := msg.Header.Get("Status"); status != "" {
			return nil, fmt.Errorf("reading a snapshot: a chunk is missing (%s %s); it was replaced meanwhile", status, msg.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(msg.Header.Get(nats.JSSequence), 10, 64)
		if err != nil || seq < next || uint64(len(doc)+len(msg.Data)) > info.Size {
			return nil, errors.New("reading a snapshot: a malformed chunk")
		}
		doc = append(doc, msg.Data...)
		next = seq + 1
	}
	if sum := sha256.Sum256(doc); uint64(len(doc)) != info.Size || !bytes.Equal(sum[:], want) {
		return nil, errors.New("reading a snapshot: its chunks do not match its description; it was replaced meanwhile")
	}
	return doc, nil
}

// snapshotMeta reads the positions a snapshot object is tagged with.
func snapshotMeta(info *jetstream.ObjectInfo) (through, gen, floor uint64, err error) {
	through, err1 := strconv.ParseUint(info.Metadata[metaThrough], 10, 64)
	gen, err2 := strconv.ParseUint(info.Metadata[metaGen], 10, 64)
	floor, err3 := strconv.ParseUint(info.Metadata[metaFloor], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, 0, fmt.Errorf("snapshot object is missing its log positions: %v", err)
	}
	return through, gen, floor, nil
}

// snapshotInfo reads the tags of a namespace's snapshot from its bucket's stream leader
// (nil: none). The object store's own GetInfo may be answered by a replica that has not
// seen the newest snapshot yet — and the purge floor must never be read old. The object
// store keeps an object's description as JSON in the last message of
// $O.<bucket>.M.<base64url name>.
func (n *Node) snapshotInfo(ctx context.Context, ns string) (*jetstream.ObjectInfo, error) {
	return n.snapshotInfoFrom(ctx, ns, n.leaderGet)
}

// snapshotInfoFrom reads the tags of a namespace's snapshot with get: from the leader
// (leaderGet) or a replica (directGetLast).
func (n *Node) snapshotInfoFrom(ctx context.Context, ns string, get func(ctx context.Context, stream, subject string) (storedEntry, error)) (*jetstream.ObjectInfo, error) {
	se, err := get(ctx, "OBJ_"+SnapshotBucket, "$O."+SnapshotBucket+".M."+base64.URLEncoding.EncodeToString([]byte(ns)))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var info jetstream.ObjectInfo
	if err := json.Unmarshal(se.Value, &info); err != nil {
		return nil, fmt.Errorf("a snapshot's description: %w", err)
	}
	if info.Deleted {
		return nil, nil
	}
	return &info, nil
}

// snapshotInfoNow reads the tags of a namespace's snapshot (nil: none) from the snapshot
// bucket's leader, or a replica while the leader does not answer (replica.go).
func (n *Node) snapshotInfoNow(ctx context.Context, ns string) (*jetstream.ObjectInfo, error) {
	var info *jetstream.ObjectInfo
	read := func(get func(ctx context.Context, stream, subject string) (storedEntry, error)) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			var err error
			info, err = n.snapshotInfoFrom(ctx, ns, get)
			return err
		}
	}
	err := n.readLeaderOrReplica(ctx, "OBJ_"+SnapshotBucket, "reading a snapshot's tags", read(n.leaderGet), read(n.directGetLast))
	return info, err
}

// snapshotFloor reads how far the log may have been purged (0: no snapshot).
func (l *nsLog) snapshotFloor(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*l.n.cfg.OpTimeout)
	defer cancel()
	info, err := l.n.snapshotInfoNow(ctx, l.ns)
	if err != nil || info == nil {
		return 0, err
	}
	_, _, floor, err := snapshotMeta(info)
	return floor, err
}

// Start returns where the document starts.
func (l *nsLog) Start() registry.LogStart { return l.start }

// Head returns the position of the newest record of the namespace (0: none yet): as the
// log stream's leader knows it, or a replica while the leader does not answer
// (replica.go).
func (l *nsLog) Head(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*l.n.cfg.OpTimeout)
	defer cancel()
	if _, err := l.n.resources(ctx); err != nil {
		return 0, err
	}
	var head uint64
	read := func(get func(ctx context.Context, stream, subject string) (storedEntry, error)) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			se, err := get(ctx, l.streamNm, l.subject)
			switch {
			case errors.Is(err, persistence.ErrNotFound):
				head = 0
				return nil
			case err != nil:
				return err
			}
			head = se.Revision
			return nil
		}
	}
	err := l.n.readLeaderOrReplica(ctx, l.streamNm, "reading the log head", read(l.n.leaderGet), read(l.n.directGetLast))
	return head, err
}

// Publish queues rec for the log (registry.NamespaceLog).
func (l *nsLog) Publish(rec registry.Record, done func(error)) error {
	if len(rec.Update) > l.n.cfg.MaxUpdateBytes {
		// The hub's replication limits keep larger writes out (cmd/hub fits them to
		// MaxUpdateBytes): this is a last guard, and nothing is published.
		return fmt.Errorf("cluster: an update of %d bytes exceeds the largest the cluster log carries in one record (%d): %w",
			len(rec.Update), l.n.cfg.MaxUpdateBytes, registry.ErrApplyFailed)
	}
	rec.Update = append([]byte(nil), rec.Update...)
	id := ""
	if rec.Kind != registry.RecordUpdate {
		id = msgID(l.ns, rec, l.n.incarnation) // sent alone, never in a batch
	}
	return l.n.pub.submit(l.subject, l.streamNm, id, rec, done)
}

// Meta reads the namespace's meta record.
func (l *nsLog) Meta(ctx context.Context) (registry.MetaState, error) {
	v, se, err := l.n.getEntry(ctx, l.ns)
	if err != nil {
		return registry.MetaState{}, err
	}
	return registry.MetaState{Gen: v.Gen, Epoch: v.Epoch, Schema: v.Schema, Changed: se.Created, Revision: se.Revision}, nil
}

// ClaimMeta replaces the meta record by compare-and-set on its revision.
func (l *nsLog) ClaimMeta(ctx context.Context, prev, next registry.MetaState) error {
	return l.n.op(ctx, "claiming a meta change", func(ctx context.Context, r *resources) error {
		cur, se, err := l.n.getEntry(ctx, l.ns)
		if err != nil {
			return err
		}
		if se.Revision != prev.Revision {
			return fmt.Errorf("%w: another node changed it first", registry.ErrConflict)
		}
		v := cur
		v.Gen, v.Epoch, v.Schema = next.Gen, next.Epoch, next.Schema
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = r.entries.Update(ctx, l.ns, b, prev.Revision)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("%w: another node changed it first", registry.ErrConflict)
		}
		return err
	})
}

// Follow starts the follower.
func (l *nsLog) Follow() {
	if l.started.Swap(true) {
		return
	}
	l.n.wg.Add(1)
	go func() {
		defer l.n.wg.Done()
		defer close(l.done)
		l.follow()
	}()
}

// Close stops following and waits for the follower (and a compaction in progress).
func (l *nsLog) Close() {
	l.once.Do(func() {
		l.cancel()
		if l.started.Load() {
			<-l.done
		}
		l.compactions.Wait()
		l.n.logsMu.Lock()
		delete(l.n.logs, l)
		l.n.logsMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), l.n.cfg.OpTimeout)
		defer cancel()
		_ = l.stream.DeleteConsumer(ctx, l.consumer) // else it expires by itself
	})
}

// follow hands every record after the start to the host, in order, until Close or until
// the host refuses one (the namespace unloaded).
func (l *nsLog) follow() {
	next, ok := l.catchUp(l.start.Through + 1) // the next log position to hand on
	if !ok {
		return
	}
	backoff := 50 * time.Millisecond
	first := true
	for l.ctx.Err() == nil {
		if !first && !l.sleep(backoff) {
			return
		}
		first = false
		var ok bool
		var err error
		next, ok, err = l.followOnce(next)
		if !ok {
			return
		}
		if err != nil {
			l.n.log.Info("following a namespace log again", slog.String("namespaceId", l.ns), slog.String("error", err.Error()))
			backoff = min(2*backoff, maxFollowBackoff)
		} else {
			backoff = 50 * time.Millisecond
		}
	}
}

func (l *nsLog) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.ctx.Done():
		return false
	}
}

// followOnce creates the consumer at next and reads from it until an error. It returns
// the next position, false when the follower must stop, and why it stopped reading.
func (l *nsLog) followOnce(next uint64) (uint64, bool, error) {
	cons, err := l.createConsumer(next)
	if err != nil {
		return next, true, err
	}
	// Compaction purges the log only through positions every consumer has acknowledged
	// and, before that, tags the new snapshot with the purge floor. The consumer exists now,
	// so a floor read after this point covers every purge that could skip records this
	// follower still needs: if the floor reaches past next, the snapshot supplies them.
	if next, ok, err := l.checkFloor(next); !ok || err != nil {
		return next, ok, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(followBatch), jetstream.PullHeartbeat(followHeartbeat),
		jetstream.PullExpiry(followExpiry))
	if err != nil {
		return next, true, classify("reading a namespace log", l.n.cfg.OpTimeout, err)
	}
	defer it.Stop()
	pulled := make(chan struct{})
	defer close(pulled)
	go l.confirmPull(cons, it, pulled)
	var dseq uint64 // the consumer's delivery sequence of the last message
	unacked := 0
	var last jetstream.Msg // the last message handed on and not acknowledged yet
	var since time.Time    // when the first of those was handed on
	for {
		m, err := l.nextMsg(it, last != nil, since)
		if errors.Is(err, context.DeadlineExceeded) && l.ctx.Err() == nil {
			_ = last.Ack() // ackIdle went by: AckAll of everything handed on
			last, unacked = nil, 0
			continue
		}
		if err != nil {
			if l.ctx.Err() != nil {
				return next, false, nil
			}
			return next, true, classify("reading a namespace log", followExpiry, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return next, true, err
		}
		if dseq != 0 && md.Sequence.Consumer != dseq+1 {
			return next, true, fmt.Errorf("a delivery was lost (consumer sequence %d after %d)", md.Sequence.Consumer, dseq)
		}
		dseq = md.Sequence.Consumer
		if md.Sequence.Stream < next {
			continue // delivered again
		}
		if !l.handOn(md.Sequence.Stream, m.Data()) {
			return next, false, nil
		}
		next = md.Sequence.Stream + 1
		l.lag.Store(md.NumPending)
		if unacked == 0 {
			since = time.Now()
		}
		unacked++
		last = m
		if unacked >= ackEvery || time.Since(since) >= ackIdle {
			_ = m.Ack() // AckAll: everything handed on so far
			last, unacked = nil, 0
		}
	}
}

// nextMsg waits for the next message of the log; while some handed on are not
// acknowledged (acking), only until ackIdle after the first of them was handed on
// (context.DeadlineExceeded: none came by then).
func (l *nsLog) nextMsg(it jetstream.MessagesContext, acking bool, since time.Time) (jetstream.Msg, error) {
	if !acking {
		return it.Next(jetstream.NextContext(l.ctx))
	}
	ctx, cancel := context.WithDeadline(l.ctx, since.Add(ackIdle))
	defer cancel()
	return it.Next(jetstream.NextContext(ctx))
}

// handOn hands the records of the message at log position seq to the host; false when
// the host refuses them (the namespace unloaded).
func (l *nsLog) handOn(seq uint64, data []byte) bool {
	recs, origin, err := decodeBatch(data)
	if err != nil {
		// Every node skips it alike: the registry refuses a record of no known kind.
		l.n.log.Error("a namespace log holds a record this node cannot read; it is skipped",
			slog.String("namespaceId", l.ns), slog.Uint64("seq", seq), slog.String("error", err.Error()))
		recs = []registry.Record{{}}
	}
	bytes := 0
	for i := range recs {
		recs[i].Seq = seq
		recs[i].Local = origin == l.n.incarnation
		bytes += len(recs[i].Update)
	}
	if !l.host.Apply(recs...) {
		return false
	}
	l.noteApplied(len(recs), bytes)
	return true
}

// checkFloor reads how far the log was purged and, if that is past next, hands the
// snapshot that covers it to the host instead of the records it can no longer read. It
// returns the next position, false when the follower must stop, and an error when the
// follower must start over (after a snapshot, too: from the position it covers).
func (l *nsLog) checkFloor(next uint64) (uint64, bool, error) {
	floor, err := l.snapshotFloor(l.ctx)
	if err != nil {
		return next, true, err
	}
	if floor < next {
		return next, true, nil
	}
	snap, ok, err := l.readSnapshot(l.ctx)
	if err != nil {
		return next, true, err
	}
	if !ok || snap.Through < next {
		return next, true, nil
	}
	l.n.log.Warn("the log was compacted past what this node had read; catching up from the snapshot",
		slog.String("namespaceId", l.ns))
	if !l.host.Apply(registry.Record{Kind: registry.RecordSnapshot, Seq: snap.Through, Gen: snap.MetaGen, Update: snap.Doc}) {
		return next, false, nil
	}
	return snap.Through + 1, true, errors.New("caught up from a snapshot")
}

// catchUp hands on the records from next through the head the log had when it was opened,
// read from any copy of the log stream (direct gets, in batches) before this node's
// consumer exists: creating a consumer needs the JetStream meta layer's leader, and an
// open would otherwise wait through its election when the node that led it died. The
// consumer then starts after what was read here. A copy that is behind ends the reading
// early, an error ends it too: the consumer reads the rest. Records purged meanwhile are
// not skipped silently: the purge floor is checked first (a compaction that starts during
// the reading purges only through the snapshot this node loaded, see compact.go).
func (l *nsLog) catchUp(next uint64) (uint64, bool) {
	if l.start.Head < next {
		return next, true
	}
	next, ok, err := l.checkFloor(next)
	if !ok || err != nil {
		return next, ok
	}
	for next <= l.start.Head && l.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(l.ctx, l.n.cfg.OpTimeout)
		read, more := uint64(0), true
		err := l.n.directBatch(ctx, l.streamNm, l.subject, next, func(seq uint64, data []byte) bool {
			if seq < next {
				return true
			}
			if seq > l.start.Head {
				return false // the consumer reads on from here
			}
			if !l.handOn(seq, data) {
				more = false
				return false
			}
			next, read = seq+1, read+1
			return true
		})
		cancel()
		if !more {
			return next, false
		}
		if err != nil || read == 0 {
			return next, true
		}
	}
	return next, true
}

// confirmPull makes sure the first pull request of a new consumer reached it: the
// consumer's server subscribes to its pull requests only after it answered the creation,
// and tells the other servers a moment later, so a request sent right away may be lost
// without an answer — and the client would notice only when the consumer's heartbeats
// fail to come, two heartbeats later. Until the consumer reports a request waiting or a
// message delivered it is asked again every pullCheckEvery; if it reports neither after
// pullChecks, the reading stops (it) and the follower starts over. It ends when done is
// closed (followOnce returned).
func (l *nsLog) confirmPull(cons jetstream.Consumer, it jetstream.MessagesContext, done <-chan struct{}) {
	for range pullChecks {
		t := time.NewTimer(pullCheckEvery)
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(l.ctx, l.n.cfg.OpTimeout)
		info, err := cons.Info(ctx)
		cancel()
		if err != nil || info.NumWaiting > 0 || info.Delivered.Consumer > 0 {
			return // an error here is the reading's to find
		}
	}
	l.n.log.Debug("a namespace log's first pull request was lost; reading it again", slog.String("namespaceId", l.ns))
	it.Stop()
}

// createConsumer (re)creates this node's consumer of the namespace at position next. Each
// attempt has consumerAttempt: JetStream places a new consumer on one of the stream's
// servers, and for a while after a node died it may still pick that one — the creation
// then goes unanswered, and the follower starts over (a new consumer lands elsewhere).
func (l *nsLog) createConsumer(next uint64) (jetstream.Consumer, error) {
	d := min(l.n.cfg.OpTimeout, consumerAttempt)
	ctx, cancel := context.WithTimeout(l.ctx, d)
	defer cancel()
	if err := l.stream.DeleteConsumer(ctx, l.consumer); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, classify("replacing a log consumer", d, err)
	}
	cons, err := l.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Name:              l.consumer,
		Description:       "Nomicore: node " + l.n.cfg.NodeName + " follows namespace " + l.ns,
		FilterSubject:     l.subject,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       next,
		AckPolicy:         jetstream.AckAllPolicy,
		AckWait:           10 * time.Minute, // the follower re-reads after errors; no redelivery needed
		MaxAckPending:     100000,
		MaxDeliver:        -1,
		InactiveThreshold: consumerIdle,
		Replicas:          1,
		MemoryStorage:     true,
	})
	if err != nil {
		return nil, classify("creating a log consumer", d, err)
	}
	return cons, nil
}

// LogInfo describes a namespace's log as stored (for operators and benchmarks).
type LogInfo struct {
	Records         int    // records kept in the log (a compacted prefix is gone)
	SnapshotThrough uint64 // the position the newest snapshot covers (0: none)
	SnapshotBytes   uint64
}

// LogInfo reads how much of a namespace's log is kept and what its snapshot covers.
func (n *Node) LogInfo(ctx context.Context, owner, ns string) (LogInfo, error) {
	var li LogInfo
	k, err := n.logStreamOf(ctx, ns)
	if err != nil {
		return li, err
	}
	stream, err := n.logStream(ctx, k)
	if err != nil {
		return li, err
	}
	err = n.op(ctx, "reading a namespace log's size", func(ctx context.Context, r *resources) error {
		subject := logSubjectIn(k, owner, ns)
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			return err
		}
		li.Records = int(info.State.Subjects[subject])
		oi, err := n.snapshotInfo(ctx, ns)
		if err != nil || oi == nil {
			return err
		}
		li.SnapshotBytes = oi.Size
		li.SnapshotThrough, _, _, err = snapshotMeta(oi)
		return err
	})
	return li, err
}

// Leading lists what this node's server leads now of the cluster's JetStream groups: "meta"
// (the JetStream meta layer, embedded servers only), the log streams and the buckets'
// streams by name. A node that dies leading one of them leaves it without a leader until the
// others elect one (seconds): what it led cannot be written, or read from its leader,
// meanwhile.
func (n *Node) Leading(ctx context.Context) ([]string, error) {
	var out []string
	if n.srv != nil && n.srv.JetStreamIsLeader() {
		out = append(out, "meta")
	}
	var names []string
	n.streamsMu.Lock()
	for k := range maxLogStreams {
		if n.streams[k] != nil {
			names = append(names, logStreamName(k))
		}
	}
	n.streamsMu.Unlock()
	names = append(names, "KV_"+EntriesBucket, "KV_"+ConfigBucket, "KV_"+LeasesBucket, "KV_"+NodesBucket, "OBJ_"+SnapshotBucket)
	err := n.op(ctx, "reading the streams' leaders", func(ctx context.Context, r *resources) error {
		out = out[:min(len(out), 1)]
		for _, name := range names {
			s, err := n.js.Stream(ctx, name)
			if err != nil {
				return err
			}
			if c := s.CachedInfo().Cluster; c != nil && c.Leader == n.cfg.NodeName {
				out = append(out, name)
			}
		}
		return nil
	})
	return out, err
}

// LogStatus is how this node follows one namespace's log.
type LogStatus struct {
	// LagRecords counts the records of the log after the last one this node handed to its
	// sequencer, as of the last delivery.
	LagRecords uint64
	// Compacting: this node holds the namespace's compaction lease and is folding the log
	// into a snapshot now.
	Compacting bool
}

// LogStatus reports how this node follows the log of namespace ns; false when it does not
// (the namespace is not loaded here).
func (n *Node) LogStatus(ns string) (LogStatus, bool) {
	n.logsMu.Lock()
	defer n.logsMu.Unlock()
	for l := range n.logs {
		if l.ns == ns && l.ctx.Err() == nil {
			return LogStatus{LagRecords: l.lag.Load(), Compacting: l.compacting.Load()}, true
		}
	}
	return LogStatus{}, false
}
