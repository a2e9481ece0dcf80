package cluster

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// The change feed of a hub cluster is its log read across namespaces and across log
// streams (streams.go): every record of a namespace log (an update, a meta change) is an
// "updated" change of that namespace, its deletion record (told by its message id) the
// "deleted" change — so a deletion is in the feed exactly when the nodes are told of it,
// and a delete interrupted before that is completed, record and all, by the next delete of
// the namespace. The changes no record carries — a creation, a restore — are small marker
// messages on subjects of their own in the stream of the namespace's log, so that they
// keep their place among its records:
//
//	<log root>.feed.<kind>.<owner>.<namespaceId>   header Nomicore-State-Vector: hex
//
// (nomicore.log.feed.… in NOMICORE_LOG, nomicore.log<k>.feed.… in NOMICORE_LOG_k; a
// creation marker rolls up an earlier one of its namespace, every restore is kept).
//
// A reader follows every log stream with an ordered consumer of its own that reads
// headers only, so the updates' bytes do not travel, and merges them as they come: the
// changes of a namespace, all in one stream, keep their order; two namespaces' changes in
// two streams are in no order with each other. The cursor of a change is the position, in
// each stream, of the last change the reader gave up to it (feedcursor.go), which is the
// same on every node: resuming after it, on any node, gives exactly the changes the reader
// had not given yet. A stream created later (a node started with more log streams) is
// found by every reader within feedWatchEvery and read from its start. Compaction purges a
// namespace's records only up to its previous snapshot, so the newest records of every
// namespace stay: a reader resuming after any cursor finds, for every write after it, that
// write's record or a later one of the same namespace. No cursor expires.
//
// The records do not carry the namespace's state vector after them; the node reading the
// feed asks its registry (changefeed.WithStateVectors), which answers with the state vector
// once it applied the log through the record (Event.Pos).
const (
	feedToken      = ".feed"
	headerSV       = "Nomicore-State-Vector"
	feedReadBuffer = 1024 // events a reader's goroutines hold ahead of its Next
	// feedWatchEvery is how often a reader looks for log streams created since it opened.
	feedWatchEvery = 2 * time.Second
)

// ChangeFeed returns the node's change feed.
func (n *Node) ChangeFeed() changefeed.Source { return clusterFeed{n} }

type clusterFeed struct{ n *Node }

var _ changefeed.Source = clusterFeed{}

// logStreamIndex tells the index of a log stream by its name.
func logStreamIndex(name string) (int, bool) {
	if name == StreamName {
		return 0, true
	}
	rest, ok := strings.CutPrefix(name, StreamName+"_")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 1 || k >= maxLogStreams || logStreamName(k) != name {
		return 0, false
	}
	return k, true
}

// logStreamsNow lists the log streams that exist now, by index (any node may have
// created more than this one).
func (n *Node) logStreamsNow(ctx context.Context) ([]int, error) {
	var out []int
	err := n.read(ctx, "listing the log streams", func(ctx context.Context, _ *resources) error {
		out = out[:0]
		l := n.js.StreamNames(ctx)
		for name := range l.Name() {
			if k, ok := logStreamIndex(name); ok {
				out = append(out, k)
			}
		}
		return l.Err()
	})
	slices.Sort(out)
	return out, err
}

// feedHead is the last position of every log stream that exists now.
func (n *Node) feedHead(ctx context.Context) (feedPos, error) {
	ks, err := n.logStreamsNow(ctx)
	if err != nil {
		return nil, err
	}
	var head feedPos
	for _, k := range ks {
		s, err := n.logStream(ctx, k)
		if err != nil {
			return nil, err
		}
		var last uint64
		if err := n.read(ctx, "reading the log's head", func(ctx context.Context, _ *resources) error {
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			last = info.State.LastSeq
			return nil
		}); err != nil {
			return nil, err
		}
		head.set(k, last)
	}
	return head, nil
}

func (f clusterFeed) ParseCursor(s string) (changefeed.Cursor, error) {
	p, err := parseFeedCursor(s)
	if err != nil {
		return "", err
	}
	return p.cursor(), nil
}

func (f clusterFeed) Head(ctx context.Context) (changefeed.Cursor, error) {
	head, err := f.n.feedHead(ctx)
	if err != nil {
		return "", err
	}
	return head.cursor(), nil
}

func (f clusterFeed) Open(ctx context.Context, after changefeed.Cursor) (changefeed.Reader, error) {
	pos, err := parseFeedCursor(string(after))
	if err != nil {
		return nil, err
	}
	head, err := f.n.feedHead(ctx)
	if err != nil {
		return nil, err
	}
	// A position past a stream's last (or in a stream that does not exist) was never given.
	for k, p := range pos {
		if p > head.at(k) {
			return nil, &changefeed.ExpiredError{Cursor: pos.cursor(), Head: head.cursor(), Newer: true}
		}
	}
	r := &clusterReader{n: f.n, stop: make(chan struct{}), pos: slices.Clone(pos), its: map[int]jetstream.MessagesContext{}, behind: map[int]bool{}}
	for k := range head {
		if err := r.follow(ctx, k, head[k], true); err != nil {
			r.Close()
			return nil, err
		}
	}
	r.wg.Add(1)
	go r.watch()
	return r, nil
}

// Latest lists every namespace of the catalog as an "updated" change without a state
// vector (a cluster does not index the newest change of each namespace; no cursor of its
// feed expires, so starting over is for readers that lost theirs).
func (f clusterFeed) Latest(ctx context.Context, fn func(changefeed.Event) error) (changefeed.Cursor, error) {
	head, err := f.n.feedHead(ctx)
	if err != nil {
		return "", err
	}
	entries, err := f.n.Store().Entries(ctx, "")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.State != persistence.StateActive {
			continue
		}
		if err := fn(changefeed.Event{Kind: persistence.ChangeUpdated, Owner: e.Owner, NamespaceID: e.NamespaceID}); err != nil {
			return "", err
		}
	}
	return head.cursor(), nil
}

// Record publishes a marker of a change no record carries.
func (f clusterFeed) Record(ctx context.Context, e changefeed.Event) error {
	return f.n.publishMarker(ctx, e.Kind, e.Owner, e.NamespaceID, e.StateVector)
}

// publishMarker writes a change-feed marker in the stream of the namespace's log and waits
// until the stream holds it.
func (n *Node) publishMarker(ctx context.Context, kind persistence.ChangeKind, owner, ns string, sv []byte) error {
	k, err := n.logStreamOf(ctx, ns)
	if err != nil {
		return err
	}
	s, err := n.logStream(ctx, k)
	if err != nil {
		return err
	}
	m := nats.NewMsg(logRoot(k) + feedToken + "." + kind.String() + "." + ownerToken(owner) + "." + ns)
	if kind != persistence.ChangeRestored {
		// A namespace is created once: a marker replaces an earlier one (of an attempt that
		// was retried) — by a rollup where the stream allows it (every log stream this
		// version creates), else by its message id within the stream's duplicate window.
		if s.CachedInfo().Config.AllowRollup {
			m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		} else {
			m.Header.Set(jetstream.MsgIDHeader, "feed-"+kind.String()+"-"+ns)
		}
	}
	if len(sv) > 0 {
		m.Header.Set(headerSV, hex.EncodeToString(sv))
	}
	return n.op(ctx, "recording a change", func(ctx context.Context, _ *resources) error {
		_, err := n.js.PublishMsg(ctx, m, jetstream.WithExpectStream(logStreamName(k)))
		return err
	})
}

// clusterReader reads the feed with an ordered consumer per log stream. One goroutine per
// stream (read) takes its messages, converts them and puts them in buf, which merges the
// streams; Next takes from buf (at most feedReadBuffer: beyond, the goroutines stop taking
// messages until Next makes room). Another goroutine (watch) follows the streams created
// later.
type clusterReader struct {
	n    *Node
	stop chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu sync.Mutex // guards everything below
	// pos is the position, in each stream, of the last change put in buf (or the cursor
	// the reader opened after): the cursor of that change.
	pos  feedPos
	its  map[int]jetstream.MessagesContext // the streams followed
	buf  []changefeed.Event
	err  error
	wake chan struct{} // closed when buf gets a change, err is set, or the reader caught up
	room chan struct{} // closed when Next takes from buf
	// behind holds the streams that have not given every message they held when the reader
	// opened yet: until none does, Next waits for them (a long poll that must not wait gets
	// what there is, not what the consumers happened to fetch yet).
	behind map[int]bool
	closed bool
	close  sync.Once
}

// follow starts following log stream k after r.pos's position in it; head is the stream's
// last position when the reader opened (first) or found it.
func (r *clusterReader) follow(ctx context.Context, k int, head uint64, first bool) error {
	s, err := r.n.logStream(ctx, k)
	if err != nil {
		return err
	}
	r.mu.Lock()
	after := r.pos.at(k)
	r.mu.Unlock()
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{logRoot(k) + ".ns.>", logRoot(k) + feedToken + ".>"},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       after + 1,
		HeadersOnly:       true,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return classify("reading the change feed", r.n.cfg.OpTimeout, err)
	}
	caughtUp := after >= head
	if !caughtUp {
		if info, err := cons.Info(ctx); err == nil {
			caughtUp = info.NumPending == 0
		}
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256), jetstream.PullHeartbeat(time.Second), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return classify("reading the change feed", r.n.cfg.OpTimeout, err)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		it.Stop()
		return nil
	}
	r.its[k] = it
	if first && !caughtUp {
		r.behind[k] = true
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go r.read(k, it)
	return nil
}

// watch follows the log streams created after the reader opened, from their start.
func (r *clusterReader) watch() {
	defer r.wg.Done()
	tick := time.NewTicker(feedWatchEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-r.stop:
			return
		case <-r.n.life.Done():
			return
		}
		ctx, cancel := context.WithTimeout(r.n.life, 2*r.n.cfg.OpTimeout)
		ks, err := r.n.logStreamsNow(ctx)
		for _, k := range ks {
			if err != nil {
				break
			}
			r.mu.Lock()
			_, known := r.its[k]
			r.mu.Unlock()
			if !known {
				err = r.follow(ctx, k, 0, false)
			}
		}
		cancel()
		if err != nil && r.n.life.Err() == nil {
			// Tried again at the next look; the streams followed go on meanwhile.
			r.n.log.Debug("the change feed could not look for new log streams", slog.String("error", err.Error()))
		}
	}
}

// read takes the messages of log stream k.
func (r *clusterReader) read(k int, it jetstream.MessagesContext) {
	defer r.wg.Done()
	for {
		m, err := it.Next()
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				r.fail(classify("reading the change feed", r.n.cfg.OpTimeout, err))
			}
			return
		}
		md, mdErr := m.Metadata()
		ev, ok := changefeed.Event{}, false
		if mdErr == nil {
			ev, ok = r.event(m, md)
		}
		for {
			r.mu.Lock()
			if ok && len(r.buf) >= feedReadBuffer {
				if r.room == nil {
					r.room = make(chan struct{})
				}
				room := r.room
				r.mu.Unlock()
				select {
				case <-room:
				case <-r.stop:
					return
				case <-r.n.life.Done():
					return
				}
				continue
			}
			var w chan struct{}
			if ok {
				r.pos.set(k, ev.Pos)
				ev.Cursor, ev.ID = r.pos.cursor(), changeID(k, ev.Pos)
				r.buf = append(r.buf, ev)
				w = r.wake
			}
			if mdErr == nil && md.NumPending == 0 && r.behind[k] {
				delete(r.behind, k)
				if len(r.behind) == 0 {
					w = r.wake
				}
			}
			if w != nil {
				r.wake = nil
			}
			r.mu.Unlock()
			if w != nil {
				close(w)
			}
			break
		}
	}
}

// changeID names the change whose record is at position pos of log stream k: the position
// alone in NOMICORE_LOG (the cursor the feed gave it before it followed other streams, so
// that a webhook's delivery id stays the same across the upgrade), "s<k>-<pos>" in another.
func changeID(k int, pos uint64) string {
	if k == 0 {
		return strconv.FormatUint(pos, 10)
	}
	return "s" + strconv.Itoa(k) + "-" + strconv.FormatUint(pos, 10)
}

// event converts a message of a log stream (<root>.ns.<owner>.<id> or a marker), whose
// metadata read already read; its Cursor is set by read.
func (r *clusterReader) event(m jetstream.Msg, md *jetstream.MsgMetadata) (changefeed.Event, bool) {
	ev := changefeed.Event{Pos: md.Sequence.Stream, At: md.Timestamp.UTC().Truncate(time.Millisecond), Kind: persistence.ChangeUpdated}
	parts := strings.Split(m.Subject(), ".")
	var ownerTok string
	switch {
	case len(parts) == 5 && parts[2] == "ns":
		ownerTok, ev.NamespaceID = parts[3], parts[4]
		if isDeletion(m.Headers()) {
			ev.Kind = persistence.ChangeDeleted
		}
	case len(parts) == 6 && parts[2] == "feed":
		kind, ok := persistence.ParseChangeKind(parts[3])
		if !ok {
			return changefeed.Event{}, false
		}
		ev.Kind, ownerTok, ev.NamespaceID = kind, parts[4], parts[5]
		if sv, err := hex.DecodeString(m.Headers().Get(headerSV)); err == nil && len(sv) > 0 {
			ev.StateVector = sv
		}
	default:
		return changefeed.Event{}, false
	}
	owner, err := base64.RawURLEncoding.DecodeString(ownerTok)
	if err != nil {
		r.n.log.Warn("the change feed met a subject it cannot read; skipped", slog.String("subject", m.Subject()))
		return changefeed.Event{}, false
	}
	ev.Owner = string(owner)
	return ev, true
}

func (r *clusterReader) fail(err error) {
	r.mu.Lock()
	r.err = err
	w := r.wake
	r.wake = nil
	r.mu.Unlock()
	if w != nil {
		close(w)
	}
}

// catchUpWait bounds how long Next waits for the messages the stream held when the reader
// opened.
const catchUpWait = 5 * time.Second

func (r *clusterReader) Next(ctx context.Context, limit int) ([]changefeed.Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) == 0 && r.err == nil && len(r.behind) > 0 {
		deadline := time.NewTimer(catchUpWait)
		defer deadline.Stop()
		for len(r.buf) == 0 && r.err == nil && len(r.behind) > 0 {
			if r.wake == nil {
				r.wake = make(chan struct{})
			}
			w := r.wake
			r.mu.Unlock()
			expired := false
			select {
			case <-w:
			case <-ctx.Done():
			case <-deadline.C:
				expired = true
			}
			r.mu.Lock()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if expired {
				clear(r.behind) // the rest comes as it arrives
			}
		}
	}
	if len(r.buf) == 0 {
		if r.err != nil {
			return nil, r.err
		}
		return nil, nil
	}
	n := min(limit, len(r.buf))
	out := append([]changefeed.Event(nil), r.buf[:n]...)
	r.buf = append(r.buf[:0], r.buf[n:]...)
	if r.room != nil {
		close(r.room)
		r.room = nil
	}
	return out, nil
}

func (r *clusterReader) Wake() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) > 0 || r.err != nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	if r.wake == nil {
		r.wake = make(chan struct{})
	}
	return r.wake
}

func (r *clusterReader) Close() {
	r.close.Do(func() {
		r.mu.Lock()
		r.closed = true
		its := r.its
		r.mu.Unlock()
		close(r.stop)
		for _, it := range its {
			it.Stop()
		}
		r.wg.Wait()
	})
}

// recordCreated writes the "created" marker of a namespace whose entry was just created.
// A failure is logged: the namespace exists, and its first write will be in the feed.
func (n *Node) recordCreated(ctx context.Context, owner, ns string, genesis []byte) {
	sv, _ := registry.FeedStateVector(genesis)
	if err := n.publishMarker(ctx, persistence.ChangeCreated, owner, ns, sv); err != nil {
		n.log.Warn("the change feed has no \"created\" change for a new namespace; its first write will be there",
			slog.String("namespaceId", ns), slog.String("error", err.Error()))
	}
}
