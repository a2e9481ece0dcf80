package ws

import "time"

// OwnersIdle reports whether no connection of h has an owner goroutine running: the state
// in which work posted to a connection must start one.
func OwnersIdle(h *Hub) bool {
	idle := true
	h.each(func(c *conn) {
		if c.ownerRunning.Load() {
			idle = false
		}
	})
	return idle
}

// SetGoroutineLinger makes the connections made from now on linger d before their idle
// owner and writer goroutines exit; the returned function restores the shipped value. Not
// for parallel tests.
func SetGoroutineLinger(d time.Duration) (restore func()) {
	old := goroutineLinger
	goroutineLinger = d
	return func() { goroutineLinger = old }
}

// WritersRunning reports how many connections of h have a writer goroutine running.
func WritersRunning(h *Hub) int {
	n := 0
	h.each(func(c *conn) {
		c.w.mu.Lock()
		if c.w.running {
			n++
		}
		c.w.mu.Unlock()
	})
	return n
}
