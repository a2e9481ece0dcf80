package clock

import (
	"sync/atomic"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeRunsDueCallbacksInOrder(t *testing.T) {
	c := NewFake(epoch)
	var order []string
	c.AfterFunc(30*time.Millisecond, func() { order = append(order, "c") })
	c.AfterFunc(10*time.Millisecond, func() { order = append(order, "a") })
	c.AfterFunc(10*time.Millisecond, func() {
		order = append(order, "b")
		// Scheduled from a callback and due within the same Advance: runs too.
		c.AfterFunc(5*time.Millisecond, func() { order = append(order, "b2") })
	})
	stopped := c.AfterFunc(20*time.Millisecond, func() { order = append(order, "never") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should succeed once")
	}
	c.Advance(25 * time.Millisecond)
	if got := c.Now().Sub(epoch); got != 25*time.Millisecond {
		t.Fatalf("now = %v", got)
	}
	want := []string{"a", "b", "b2"}
	if len(order) != len(want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order = %v, want %v", order, want)
		}
	}
	if c.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", c.Pending())
	}
	c.Advance(5 * time.Millisecond)
	if order[len(order)-1] != "c" {
		t.Fatalf("order = %v", order)
	}
}

func TestFakeCallbackSeesItsDeadline(t *testing.T) {
	c := NewFake(epoch)
	var at time.Time
	fired := c.AfterFunc(7*time.Second, func() { at = c.Now() })
	c.Advance(time.Minute)
	if !at.Equal(epoch.Add(7 * time.Second)) {
		t.Fatalf("callback saw %v", at.Sub(epoch))
	}
	if fired.Stop() {
		t.Fatal("Stop after firing reported success")
	}
}

func TestWaitForTimers(t *testing.T) {
	c := NewFake(epoch)
	var n atomic.Int32
	go c.AfterFunc(time.Second, func() { n.Add(1) })
	if !c.WaitForTimers(1, 5*time.Second) {
		t.Fatal("timer never armed")
	}
	c.Advance(time.Second)
	if n.Load() != 1 {
		t.Fatal("callback did not run")
	}
	if c.WaitForTimers(1, 20*time.Millisecond) {
		t.Fatal("no timer should be pending")
	}
}

func TestRealClock(t *testing.T) {
	done := make(chan struct{})
	Real().AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	if Real().Now().IsZero() {
		t.Fatal("zero time")
	}
}

func TestTickerDropsUntakenTicks(t *testing.T) {
	c := NewFake(epoch)
	tk := NewTicker(c, time.Second)
	c.Advance(3500 * time.Millisecond) // three ticks due, none taken: one waits
	select {
	case <-tk.C:
	default:
		t.Fatal("no tick")
	}
	select {
	case <-tk.C:
		t.Fatal("a backlog of ticks")
	default:
	}
	c.Advance(500 * time.Millisecond)
	select {
	case <-tk.C:
	default:
		t.Fatal("no tick at 4s")
	}
	tk.Stop()
	c.Advance(10 * time.Second)
	select {
	case <-tk.C:
		t.Fatal("tick after Stop")
	default:
	}
	if c.Pending() != 0 {
		t.Fatalf("%d timers pending after Stop", c.Pending())
	}
}
