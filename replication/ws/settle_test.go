package ws

import "testing"

// TestSettleRunsEveryDeferredCallOnce: the calls that deferred calls defer run after the
// ones deferred before them, each once and in order, whatever the list's size — past
// maxDeferKept too, where settle does not keep the list's array.
func TestSettleRunsEveryDeferredCallOnce(t *testing.T) {
	c := &conn{closing: true} // the pump has nothing to do
	var ran []int
	for _, n := range []int{3, maxDeferKept + 50, 5, maxDeferKept + 1, 2, 40, maxDeferKept + 7} {
		ran = ran[:0]
		for i := range n {
			c.defer_(func() {
				ran = append(ran, i)
				c.defer_(func() { ran = append(ran, n+i) })
			})
		}
		c.settle()
		if len(ran) != 2*n {
			t.Fatalf("%d calls deferred, each deferring one: %d ran", n, len(ran))
		}
		for i, v := range ran {
			if v != i {
				t.Fatalf("%d calls deferred: call %d ran as number %d", n, v, i)
			}
		}
		if len(c.deferred) != 0 {
			t.Fatalf("%d calls left deferred after settle", len(c.deferred))
		}
	}
}
