package cluster

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// The change feed of a hub cluster is its log read across namespaces: every record of a
// namespace log (an update, a meta change) is an "updated" change of that namespace, its
// deletion record (told by its message id) the "deleted" change — so a deletion is in the
// feed exactly when the nodes are told of it, and a delete interrupted before that is
// completed, record and all, by the next delete of the namespace. The changes no record
// carries — a creation, a restore — are small marker messages on subjects of their own in
// the same stream:
//
//	nomicore.log.feed.<kind>.<owner>.<namespaceId>   header Nomicore-State-Vector: hex
//
// (a creation marker rolls up an earlier one of its namespace; every restore is kept). The cursor of a
// change is the stream position of its message, which is the same on every node; a reader
// follows the stream with an ordered consumer of its own that reads headers only, so the
// updates' bytes do not travel. Compaction purges a namespace's records only up to its
// previous snapshot, so the newest records of every namespace stay: a reader resuming
// after any cursor finds, for every write after it, that write's record or a later one of
// the same namespace. No cursor expires.
//
// The records do not carry the namespace's state vector after them; the node reading the
// feed asks its registry (changefeed.WithStateVectors), which answers with the state vector
// once it applied the log through the record.
const (
	feedSubject    = subjectRoot + ".feed"
	headerSV       = "Nomicore-State-Vector"
	feedReadBuffer = 1024 // events a reader's goroutine holds ahead of its Next
)

// ChangeFeed returns the node's change feed.
func (n *Node) ChangeFeed() changefeed.Source { return clusterFeed{n} }

type clusterFeed struct{ n *Node }

var _ changefeed.Source = clusterFeed{}

// streamHead is the stream's last position.
func (n *Node) streamHead(ctx context.Context) (uint64, error) {
	var head uint64
	err := n.read(ctx, "reading the log's head", func(ctx context.Context, r *resources) error {
		info, err := r.stream.Info(ctx)
		if err != nil {
			return err
		}
		head = info.State.LastSeq
		return nil
	})
	return head, err
}

func (f clusterFeed) Head(ctx context.Context) (uint64, error) { return f.n.streamHead(ctx) }

func (f clusterFeed) Open(ctx context.Context, after uint64) (changefeed.Reader, error) {
	head, err := f.n.streamHead(ctx)
	if err != nil {
		return nil, err
	}
	if after > head {
		return nil, &changefeed.ExpiredError{Cursor: after, Head: head}
	}
	res, err := f.n.resources(ctx)
	if err != nil {
		return nil, err
	}
	cons, err := res.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{subjectRoot + ".ns.>", feedSubject + ".>"},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       after + 1,
		HeadersOnly:       true,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return nil, classify("reading the change feed", f.n.cfg.OpTimeout, err)
	}
	// What the feed holds after the cursor now: Next waits for it (a long poll that must
	// not wait gets what there is, not what the consumer happened to fetch yet).
	caughtUp := after == head
	if !caughtUp {
		if info, err := cons.Info(ctx); err == nil {
			caughtUp = info.NumPending == 0
		}
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256), jetstream.PullHeartbeat(time.Second), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return nil, classify("reading the change feed", f.n.cfg.OpTimeout, err)
	}
	r := &clusterReader{n: f.n, it: it, done: make(chan struct{}), stop: make(chan struct{}), space: make(chan struct{}, 1), caughtUp: caughtUp}
	go r.read()
	return r, nil
}

// Latest lists every namespace of the catalog as an "updated" change without a state
// vector (a cluster does not index the newest change of each namespace; no cursor of its
// feed expires, so starting over is for readers that lost theirs).
func (f clusterFeed) Latest(ctx context.Context, fn func(changefeed.Event) error) (uint64, error) {
	head, err := f.n.streamHead(ctx)
	if err != nil {
		return 0, err
	}
	entries, err := f.n.Store().Entries(ctx, "")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if e.State != persistence.StateActive {
			continue
		}
		if err := fn(changefeed.Event{Kind: persistence.ChangeUpdated, Owner: e.Owner, NamespaceID: e.NamespaceID}); err != nil {
			return 0, err
		}
	}
	return head, nil
}

// Record publishes a marker of a change no record carries.
func (f clusterFeed) Record(ctx context.Context, e changefeed.Event) error {
	return f.n.publishMarker(ctx, e.Kind, e.Owner, e.NamespaceID, e.StateVector)
}

// publishMarker writes a change-feed marker and waits until the stream holds it.
func (n *Node) publishMarker(ctx context.Context, kind persistence.ChangeKind, owner, ns string, sv []byte) error {
	m := nats.NewMsg(feedSubject + "." + kind.String() + "." + ownerToken(owner) + "." + ns)
	if kind != persistence.ChangeRestored {
		// A namespace is created once: a marker replaces an earlier one (of an attempt that
		// was retried). Restores are kept, each: a reader behind gets every one.
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	}
	if len(sv) > 0 {
		m.Header.Set(headerSV, hex.EncodeToString(sv))
	}
	return n.op(ctx, "recording a change", func(ctx context.Context, _ *resources) error {
		_, err := n.js.PublishMsg(ctx, m, jetstream.WithExpectStream(StreamName))
		return err
	})
}

// clusterReader reads the feed with an ordered consumer. One goroutine (read) takes the
// messages and converts them; Next takes what it has buffered (at most feedReadBuffer:
// beyond, the goroutine stops taking messages until Next makes room).
type clusterReader struct {
	n     *Node
	it    jetstream.MessagesContext
	done  chan struct{} // closed when read returns
	stop  chan struct{} // closed by Close
	space chan struct{} // cap 1: Next made room in buf

	mu   sync.Mutex // guards buf, err, wake and caughtUp
	buf  []changefeed.Event
	err  error
	wake chan struct{}
	// caughtUp: the reader got every message the stream held when it opened (or later).
	caughtUp bool
	close    sync.Once
}

func (r *clusterReader) read() {
	defer close(r.done)
	for {
		m, err := r.it.Next()
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				r.fail(classify("reading the change feed", r.n.cfg.OpTimeout, err))
			}
			return
		}
		ev, ok := r.event(m)
		if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
			r.mu.Lock()
			w := r.wake
			if !r.caughtUp {
				r.caughtUp, r.wake = true, nil
			} else {
				w = nil
			}
			r.mu.Unlock()
			if w != nil {
				close(w)
			}
		}
		if !ok {
			continue
		}
		for {
			r.mu.Lock()
			if len(r.buf) < feedReadBuffer {
				r.buf = append(r.buf, ev)
				w := r.wake
				r.wake = nil
				r.mu.Unlock()
				if w != nil {
					close(w)
				}
				break
			}
			r.mu.Unlock()
			select {
			case <-r.space:
			case <-r.stop:
				return
			case <-r.n.life.Done():
				return
			}
		}
	}
}

// event converts a message of the stream (nomicore.log.ns.<owner>.<id> or a marker).
func (r *clusterReader) event(m jetstream.Msg) (changefeed.Event, bool) {
	md, err := m.Metadata()
	if err != nil {
		return changefeed.Event{}, false
	}
	ev := changefeed.Event{Cursor: md.Sequence.Stream, At: md.Timestamp.UTC().Truncate(time.Millisecond), Kind: persistence.ChangeUpdated}
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
	if len(r.buf) == 0 && r.err == nil && !r.caughtUp {
		deadline := time.NewTimer(catchUpWait)
		defer deadline.Stop()
		for len(r.buf) == 0 && r.err == nil && !r.caughtUp {
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
				r.caughtUp = true // the rest comes as it arrives
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
	select {
	case r.space <- struct{}{}:
	default:
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
		close(r.stop)
		r.it.Stop()
		<-r.done
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
