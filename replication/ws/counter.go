package ws

import (
	"sync"
)

// counter counts outstanding things and says when there are none; unlike a WaitGroup it may
// go up again while someone waits. Safe for concurrent use.
type counter struct {
	mu sync.Mutex // guards n and idle
	n  int
	// idle is made by zero for its waiters while n > 0, and closed and dropped when n
	// reaches 0: a count that goes up and down with nobody waiting (one per update
	// applied) makes no channel.
	idle chan struct{}
}

// closedChan is the zero signal of a counter at zero.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// add counts one.
func (w *counter) add() {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
}

// done uncounts one.
func (w *counter) done() {
	w.mu.Lock()
	if w.n--; w.n == 0 && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
	w.mu.Unlock()
}

// zero returns a channel closed when the count is zero.
func (w *counter) zero() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		return closedChan
	}
	if w.idle == nil {
		w.idle = make(chan struct{})
	}
	return w.idle
}

// begin counts one and returns its idempotent end.
func (w *counter) begin() func() {
	w.add()
	var once sync.Once
	return func() { once.Do(w.done) }
}
