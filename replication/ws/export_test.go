package ws

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
