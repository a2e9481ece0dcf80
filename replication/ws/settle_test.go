package ws

import "testing"

// TestSettleRunsEveryDeferredCallOnce: the calls that deferred calls defer run on the next
// turn, each once and in order, whatever the lists' sizes — past maxDeferSpare too, where
// settle does not keep the list it ran for the next turn.
func TestSettleRunsEveryDeferredCallOnce(t *testing.T) {
	c := &conn{closing: true} // the pump has nothing to do
	var ran []int
	for _, n := range []int{3, maxDeferSpare + 50, 5, maxDeferSpare + 1, 2, 40, maxDeferSpare + 7} {
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
