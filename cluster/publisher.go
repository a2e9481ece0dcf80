package cluster

import (
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publisher sends records to the log stream, in the order they were submitted, from one
// goroutine: the records of a namespace that one node publishes reach the log in the order
// its sequencer admitted them (a record sent again, below, may land after later ones).
// Submitting never blocks (a bounded queue; overflow policy: refuse the newest at once).
// The stream's acknowledgement, an error, or the publish deadline settles each record
// through the JetStream client's async handlers. A record the stream did not acknowledge
// — no server received it, or no answer came within attemptTimeout (the stream is between
// leaders: a node died; an election takes 4 to 9 seconds) — is sent again, with the same
// message id, until Config.PublishTimeout after its first attempt: the stream drops a
// second copy that arrives within its duplicate window (2 minutes, far longer).
type publisher struct {
	n    *Node
	q    chan *pubReq
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex // guards inflight and closed
	inflight map[*nats.Msg]*pubReq
	closed   bool
}

type pubReq struct {
	msg   *nats.Msg
	id    string
	done  func(error)
	start time.Time // the first attempt
	retry time.Duration
}

func newPublisher(n *Node) *publisher {
	p := &publisher{n: n, q: make(chan *pubReq, n.cfg.MaxPublishQueue), stop: make(chan struct{}),
		done: make(chan struct{}), inflight: make(map[*nats.Msg]*pubReq)}
	go p.loop()
	return p
}

// submit queues a record for publishing; done is called once with its outcome.
func (p *publisher) submit(subject, id string, data []byte, done func(error)) error {
	m := nats.NewMsg(subject)
	m.Data = data
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return &UnavailableError{Op: "publishing a record", Err: errors.New("the node is closed")}
	}
	select {
	case p.q <- &pubReq{msg: m, id: id, done: done}:
		return nil
	default:
		p.n.metrics.publishErrors.Inc()
		return ErrPublishQueueFull
	}
}

func (p *publisher) loop() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case r := <-p.q:
			if r.start.IsZero() {
				r.start = p.n.cfg.Clock.Now()
			}
			p.mu.Lock()
			p.inflight[r.msg] = r
			p.mu.Unlock()
			_, err := p.n.js.PublishMsgAsync(r.msg, jetstream.WithMsgID(r.id), jetstream.WithExpectStream(StreamName))
			if err != nil {
				p.acked(r.msg, err)
			}
		}
	}
}

// again sends r once more after a backoff, if its deadline allows; it reports whether it
// will.
func (p *publisher) again(r *pubReq) bool {
	r.retry = min(max(2*r.retry, 50*time.Millisecond), 500*time.Millisecond)
	if p.n.cfg.Clock.Now().Add(r.retry).Sub(r.start) >= p.n.cfg.PublishTimeout {
		return false
	}
	m := nats.NewMsg(r.msg.Subject) // a fresh message: the client keys its handlers by it
	m.Data = r.msg.Data
	r.msg = m
	p.n.cfg.Clock.AfterFunc(r.retry, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			go r.done(&UnavailableError{Op: "publishing a record", Err: errors.New("the node closed")})
			return
		}
		select {
		case p.q <- r:
		default:
			go r.done(ErrPublishQueueFull)
		}
	})
	return true
}

// acked settles a record: the stream acknowledged it (err nil) or it failed. Called by the
// JetStream client's handlers, which must not block: done only posts.
func (p *publisher) acked(m *nats.Msg, err error) {
	p.mu.Lock()
	r := p.inflight[m]
	delete(p.inflight, m)
	p.mu.Unlock()
	if r == nil {
		return
	}
	if err == nil {
		p.n.metrics.publishSeconds.Observe(p.n.cfg.Clock.Now().Sub(r.start).Seconds())
		r.done(nil)
		return
	}
	err = classify("publishing a record", p.n.cfg.PublishTimeout, err)
	var ue *UnavailableError
	if errors.As(err, &ue) && p.again(r) {
		return
	}
	p.n.metrics.publishErrors.Inc()
	r.done(err)
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
	for {
		select {
		case r := <-p.q:
			r.done(gone)
			continue
		default:
		}
		break
	}
	p.mu.Lock()
	inflight := p.inflight
	p.inflight = map[*nats.Msg]*pubReq{}
	p.mu.Unlock()
	for _, r := range inflight {
		r.done(gone)
	}
}
