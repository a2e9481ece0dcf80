package ws

import "sync"

// mailbox carries functions from any goroutine to one owner goroutine (a connection's or the
// peer controller's). post never blocks; the owner waits on wake, then runs what take
// returns. After shut, posts are refused (post reports false) and the owner runs what was
// left. Its length is bounded by the posters: each posts only for work it was admitted to.
type mailbox struct {
	wake chan struct{} // capacity 1: "something was posted"

	mu     sync.Mutex // guards posted, spare, closed
	posted []func()
	spare  []func() // a taken slice given back (recycle), reused for the next posts
	closed bool
}

func newMailbox() mailbox { return mailbox{wake: make(chan struct{}, 1)} }

// post queues f for the owner; false once the mailbox is shut.
func (m *mailbox) post(f func()) bool {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return false
	}
	m.posted = append(m.posted, f)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns and clears what was posted.
func (m *mailbox) take() []func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	fs := m.posted
	m.posted, m.spare = m.spare, nil
	return fs
}

// recycle gives back a slice take returned, once its functions have run, so that posting
// allocates nothing in the steady state.
func (m *mailbox) recycle(fs []func()) {
	clear(fs)
	m.mu.Lock()
	if m.spare == nil {
		m.spare = fs[:0]
	}
	m.mu.Unlock()
}

// shut refuses later posts and returns what was posted before.
func (m *mailbox) shut() []func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	fs := m.posted
	m.posted = nil
	return fs
}
