package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// goal is the heap goal the runtime derives from GOGC pct and a live heap (the GC guide):
// live × (1 + pct/100), or the minimum heap (4 MiB × pct/100) if that is larger.
func goal(live uint64, pct int) uint64 {
	return max(live*uint64(100+pct)/100, runtimeMinHeap*uint64(pct)/100)
}

func TestPercentSetsTheGoalToLivePlusTheLargerOfLiveAndFloor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 10 * mib, 250},        // before the first collection: a 10 MiB minimum heap
		{1 * mib, 10 * mib, 275},  // the minimum heap, 11 MiB, is the goal
		{3 * mib, 10 * mib, 325},  // 13 MiB: the minimum heap (334 would make it 13.36)
		{5 * mib, 10 * mib, 200},  // a 10 MiB headroom: 15 MiB
		{8 * mib, 10 * mib, 125},  // 18 MiB
		{10 * mib, 10 * mib, 100}, // the live heap is the headroom from here on
		{1 << 30, 10 * mib, 100},
		{1 * mib, 1 * mib, 100},
		{0, 1 * mib, 100}, // a floor below the runtime's minimum leaves GOGC 100
	} {
		got := Percent(c.live, c.floor)
		if got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
		// The goal it gives is live + max(live, floor), to within a percent of live + floor
		// (integer percents), and never less than GOGC 100's.
		want := c.live + max(c.live, c.floor)
		if g := goal(c.live, got); g < want*99/100 || g > want*101/100 && got > 100 {
			t.Errorf("Percent(%d MiB, %d MiB) = %d: heap goal %.2f MiB, want %.2f MiB", c.live/mib, c.floor/mib, got, float64(g)/mib, float64(want)/mib)
		}
	}
}

// gogc reads the GOGC the runtime is using.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// collectUntil runs collections until ok holds, for at most ten seconds: the Pacer adjusts
// in a cleanup, which runs shortly after a collection, not during it.
func collectUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after ten seconds of collections: %s (GOGC is %d)", what, gogc())
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

var keep []byte

func TestPacerFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	// A test binary's live heap is well under 64 MiB: the floor sets GOGC, above 100.
	p := Start(64 << 20)
	defer p.Stop()
	collectUntil(t, "GOGC above 100 with a small live heap", func() bool { return p.Percent() > 100 && gogc() == p.Percent() })

	// 32 MiB live past a 4 MiB floor: GOGC 100.
	p.Stop()
	p = Start(4 << 20)
	keep = make([]byte, 32<<20)
	for i := range keep {
		keep[i] = 1 // resident, and not optimised away
	}
	collectUntil(t, "GOGC 100 with 32 MiB live", func() bool { return p.Percent() == 100 && gogc() == 100 })

	// The heap shrinks again: the Pacer raises GOGC after the next collections.
	keep = nil
	collectUntil(t, "GOGC above 100 once the 32 MiB are gone", func() bool { return p.Percent() > 100 && gogc() == p.Percent() })

	// Once stopped, it changes nothing.
	p.Stop()
	debug.SetGCPercent(150)
	runtime.GC()
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if got := gogc(); got != 150 {
		t.Fatalf("a stopped Pacer changed GOGC to %d", got)
	}
}
