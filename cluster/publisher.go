package cluster

import (
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/registry"
)

// publisher sends records to the log streams, pipelined and batched per namespace: each
// namespace (one subject) has at most maxBatchesInFlight messages on their way to its
// stream at a time; the records its sequencer admits meanwhile wait, in order, and leave
// together as one batch (record.go), sent by the publisher's goroutine, when a message of
// the namespace settles. A record of a namespace with nothing on its way leaves at once,
// alone, handed to the client by the submitting goroutine itself (one goroutine hand-off
// less on the way of a lone write); under load each namespace costs one message per
// round trip of its stream however many records it carries — many records share one
// stream write, one replication round and one acknowledgement. The records of a namespace
// that one node publishes reach the log in the order its sequencer admitted them (a
// message sent again, below, may land after later ones).
//
// Submitting never blocks (a lone record sent by the submitter is small and waits for no
// room in the client, see inlineMaxBytes): at most Config.MaxPublishQueue records wait in
// all (overflow policy: refuse the newest at once, ErrPublishQueueFull). The stream's
// acknowledgement, an error, or the publish deadline settles each message — and every
// record in it — through the JetStream client's async handlers. A message the stream did not acknowledge — no
// server received it, or no answer came within attemptTimeout (the stream is between
// leaders: a node died; an election takes 4 to 9 seconds) — is sent again, with the same
// message id and bytes, until Config.PublishTimeout after its first attempt: the stream
// drops a second copy that arrives within its duplicate window (2 minutes, far longer).
type publisher struct {
	n    *Node
	wake chan struct{} // the loop has work: a namespace is ready, or a message is to be sent again
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex // guards the fields below
	queues   map[string]*pubQueue
	ready    []*pubQueue // namespaces with records waiting and room for a message in flight
	resend   []*pubBatch // messages whose backoff ended, to be sent again
	waiting  int         // records waiting in all queues
	inflight map[*nats.Msg]*pubBatch
	closed   bool
}

// maxBatchesInFlight is how many messages of one namespace may be on their way to its
// stream at once: two keep the stream busy while the records of the next batch gather.
const maxBatchesInFlight = 2

// maxBatchBytes bounds the records one batch gathers (a single record may be larger: it
// leaves alone, up to Config.MaxUpdateBytes).
const maxBatchBytes = 256 << 10

// pubQueue is one namespace's records waiting to be published, and its messages in flight.
type pubQueue struct {
	subject, stream string
	recs            []pubRec
	flying          int  // messages in flight
	listed          bool // in publisher.ready
	sending         bool // submit is handing a message of it to the client
}

// pubRec is a record waiting for its message.
type pubRec struct {
	rec  registry.Record
	id   string // a meta change's message id; "" for an update
	done func(error)
}

// pubBatch is one message of the log: one record, or a batch of updates.
type pubBatch struct {
	q     *pubQueue
	msg   *nats.Msg
	id    string
	done  []func(error)
	start time.Time // the first attempt
	retry time.Duration
}

func newPublisher(n *Node) *publisher {
	p := &publisher{n: n, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		queues: make(map[string]*pubQueue), inflight: make(map[*nats.Msg]*pubBatch)}
	go p.loop()
	return p
}

// submit queues a record of the namespace log on subject (of stream) for publishing; done
// is called once with its outcome. id is a meta change's message id (it is sent alone);
// an update's is made from its origin and token.
func (p *publisher) submit(subject, stream, id string, rec registry.Record, done func(error)) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return &UnavailableError{Op: "publishing a record", Err: errors.New("the node is closed")}
	}
	if p.waiting >= p.n.cfg.MaxPublishQueue {
		p.mu.Unlock()
		p.n.metrics.publishErrors.Inc()
		return ErrPublishQueueFull
	}
	q := p.queues[subject]
	if q == nil {
		q = &pubQueue{subject: subject, stream: stream}
		p.queues[subject] = q
	}
	q.recs = append(q.recs, pubRec{rec: rec, id: id, done: done})
	p.waiting++
	if q.flying > 0 || q.listed || len(q.recs) > 1 || len(rec.Update) > inlineMaxBytes || len(p.inflight) >= p.n.cfg.MaxPublishQueue/2 {
		p.markReady(q)
		p.mu.Unlock()
		return nil
	}
	// The namespace has nothing on its way: the record leaves now, from the caller's
	// goroutine, without waking the loop. Its later records wait (q.sending) until this
	// message is with the client, so they follow it. The message is whole before it is
	// counted in flight (close may settle it from there; it is small, see inlineMaxBytes).
	b := &pubBatch{q: q, msg: nats.NewMsg(q.subject)}
	p.compose(b, p.takeBatch(q))
	q.flying++
	q.sending = true
	p.inflight[b.msg] = b
	p.mu.Unlock()
	p.send(b, jetstream.WithStallWait(inlineStallWait))
	p.mu.Lock()
	q.sending = false
	p.markReady(q)
	p.mu.Unlock()
	return nil
}

// A record sent from the submitting goroutine is at most inlineMaxBytes (a larger one is
// the loop's to write out), and waits at most inlineStallWait for the client's room for
// messages awaiting acknowledgement — there is room unless the streams fall far behind;
// without it the record is sent again later, like a message no server took.
const (
	inlineMaxBytes  = 16 << 10
	inlineStallWait = time.Millisecond
)

// markReady lists q for the loop if it has records waiting and room for a message, and no
// message of it is being handed to the client (p.mu held).
func (p *publisher) markReady(q *pubQueue) {
	if q.listed || q.sending || len(q.recs) == 0 || q.flying >= maxBatchesInFlight {
		return
	}
	q.listed = true
	p.ready = append(p.ready, q)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *publisher) loop() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
		for {
			b := p.next()
			if b == nil {
				break
			}
			p.send(b)
		}
	}
}

// send hands b to the JetStream client, which settles it through the publisher's handlers.
func (p *publisher) send(b *pubBatch, opts ...jetstream.PublishOpt) {
	if b.start.IsZero() {
		b.start = p.n.cfg.Clock.Now()
	}
	opts = append(opts, jetstream.WithMsgID(b.id), jetstream.WithExpectStream(b.q.stream))
	if _, err := p.n.js.PublishMsgAsync(b.msg, opts...); err != nil {
		p.acked(b.msg, err)
	}
}

// next takes the next message to send: one to send again, else the next batch of a ready
// namespace (nil: nothing to do). The message is counted in flight from here.
func (p *publisher) next() *pubBatch {
	p.mu.Lock()
	var b *pubBatch
	var recs []pubRec
	switch {
	case p.closed:
	case len(p.resend) > 0:
		b = p.resend[0]
		p.resend[0] = nil
		p.resend = p.resend[1:]
		m := nats.NewMsg(b.msg.Subject) // a fresh message: the client keys its handlers by it
		m.Data = b.msg.Data
		b.msg = m
	case len(p.ready) > 0:
		q := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		q.listed = false
		recs = p.takeBatch(q)
		q.flying++
		b = &pubBatch{q: q}
		p.markReady(q) // more waiting than one batch takes, and room for another message
	}
	if b != nil {
		if recs != nil {
			b.msg = nats.NewMsg(b.q.subject)
		}
		p.inflight[b.msg] = b
	}
	p.mu.Unlock()
	if recs != nil {
		p.compose(b, recs)
	}
	return b
}

// takeBatch takes the records of q's next message (p.mu held): a meta change alone; else
// the updates at the head of the queue, up to maxBatchRecords and maxBatchBytes.
func (p *publisher) takeBatch(q *pubQueue) []pubRec {
	n, bytes := 1, len(q.recs[0].rec.Update)
	if q.recs[0].id == "" {
		for n < len(q.recs) && n < maxBatchRecords {
			r := q.recs[n]
			if r.id != "" || bytes+len(r.rec.Update)+batchRecordOverhead > min(maxBatchBytes, p.n.cfg.MaxUpdateBytes) {
				break
			}
			bytes += len(r.rec.Update) + batchRecordOverhead
			n++
		}
	}
	recs := q.recs[:n:n]
	q.recs = q.recs[n:]
	if len(q.recs) == 0 {
		q.recs = nil // let the backing array go
	}
	p.waiting -= n
	return recs
}

// compose encodes the message of recs into b (outside p.mu, except for a lone small record
// sent by submit: the bytes are copied here).
func (p *publisher) compose(b *pubBatch, recs []pubRec) {
	rs := make([]registry.Record, len(recs))
	b.done = make([]func(error), len(recs))
	for i, r := range recs {
		rs[i], b.done[i] = r.rec, r.done
	}
	b.msg.Data = encodeBatch(rs, p.n.incarnation)
	b.id = recs[0].id
	if b.id == "" {
		b.id = msgID("", rs[0], p.n.incarnation)
	}
}

// again schedules b to be sent once more after a backoff, if its deadline allows; it
// reports whether it will. b stays in flight meanwhile: the namespace's later records wait
// behind it.
func (p *publisher) again(b *pubBatch) bool {
	b.retry = min(max(2*b.retry, 50*time.Millisecond), 500*time.Millisecond)
	if p.n.cfg.Clock.Now().Add(b.retry).Sub(b.start) >= p.n.cfg.PublishTimeout {
		return false
	}
	p.n.cfg.Clock.AfterFunc(b.retry, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			go b.settle(&UnavailableError{Op: "publishing a record", Err: errors.New("the node closed")})
			return
		}
		p.resend = append(p.resend, b)
		select {
		case p.wake <- struct{}{}:
		default:
		}
	})
	return true
}

// acked settles a message: the stream acknowledged it (err nil) or it failed. Called by the
// JetStream client's handlers, which must not block: the records' done only post.
func (p *publisher) acked(m *nats.Msg, err error) {
	p.mu.Lock()
	b := p.inflight[m]
	delete(p.inflight, m)
	p.mu.Unlock()
	if b == nil {
		return
	}
	if err != nil {
		err = classify("publishing a record", p.n.cfg.PublishTimeout, err)
		var ue *UnavailableError
		if errors.As(err, &ue) && p.again(b) {
			return
		}
		p.n.metrics.publishErrors.Inc()
	} else {
		p.n.metrics.publishSeconds.Observe(p.n.cfg.Clock.Now().Sub(b.start).Seconds())
		p.n.metrics.publishBatch.Observe(float64(len(b.done)))
	}
	p.mu.Lock()
	b.q.flying--
	if b.q.flying == 0 && len(b.q.recs) == 0 && !b.q.listed {
		delete(p.queues, b.q.subject) // an idle namespace keeps nothing here
	} else {
		p.markReady(b.q)
	}
	p.mu.Unlock()
	b.settle(err)
}

// settle answers every record of b.
func (b *pubBatch) settle(err error) {
	for _, done := range b.done {
		done(err)
	}
}

// close stops the publisher; what is queued or in flight is answered unavailable.
func (p *publisher) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	gone := &UnavailableError{Op: "publishing a record", Err: errors.New("the node closed")}
	p.mu.Lock()
	queues, inflight, resend := p.queues, p.inflight, p.resend
	p.queues, p.inflight, p.resend, p.ready, p.waiting = map[string]*pubQueue{}, map[*nats.Msg]*pubBatch{}, nil, nil, 0
	p.mu.Unlock()
	for _, q := range queues {
		for _, r := range q.recs {
			r.done(gone)
		}
	}
	for _, b := range inflight {
		b.settle(gone)
	}
	for _, b := range resend {
		b.settle(gone)
	}
}
