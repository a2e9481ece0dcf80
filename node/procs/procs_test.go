package procs

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"auto": {Auto: true}, "all": {}, "1": {Fixed: 1}, "12": {Fixed: 12}} {
		m, err := ParseMode(in)
		if err != nil || m != want || m.String() != in {
			t.Errorf("%q: %+v %v (String %q)", in, m, err, m.String())
		}
	}
	for _, in := range []string{"", "0", "-2", "two", "auto "} {
		if m, err := ParseMode(in); err == nil {
			t.Errorf("%q accepted as %+v", in, m)
		}
	}
}

const ms = time.Millisecond

// One processor stays while it has room; a sample in which it was saturated widens at once.
func TestGovernorWidensWhenTheOneProcessorIsSaturated(t *testing.T) {
	var g governor
	for _, used := range []time.Duration{0, 10 * ms, 50 * ms, 79 * ms, 60 * ms} {
		if g.observe(used, 100*ms) {
			t.Fatalf("widened at %v of 100ms", used)
		}
	}
	if !g.observe(80*ms, 100*ms) {
		t.Fatal("one processor busy 80 % of a sample did not widen")
	}
	if !g.observe(0, 0) {
		t.Fatal("an empty sample changed the decision")
	}
}

// On every core, only a whole window of samples averaging under lowerBelowCores narrows;
// a window above it starts the next one.
func TestGovernorNarrowsAfterAQuietWindow(t *testing.T) {
	g := governor{wide: true}
	// A window averaging 0.45 cores, low samples and a burst: stays wide.
	for i := range lowerSamples {
		used := 30 * ms
		if i == 10 {
			used = 30*ms + lowerSamples*15*ms
		}
		if !g.observe(used, 100*ms) {
			t.Fatalf("narrowed at sample %d of a window averaging 0.45 cores", i)
		}
	}
	// The next window averages 0.39 cores: wide until its last sample.
	for i := range lowerSamples - 1 {
		if !g.observe(39*ms, 100*ms) {
			t.Fatalf("narrowed after %d quiet samples, before the window ended", i+1)
		}
	}
	if g.observe(39*ms, 100*ms) {
		t.Fatal("a whole window under 0.4 cores did not narrow")
	}
	// Narrow again: the thresholds of one processor apply.
	if g.observe(70*ms, 100*ms) || !g.observe(90*ms, 100*ms) {
		t.Fatal("after narrowing, the one-processor threshold does not apply")
	}
}

// Run samples every Interval and narrows or widens the processor count as the governor
// decides; it returns when its context ends.
func TestRunFollowsTheLoad(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	// Run reads the CPU time once when it starts and once per tick, after the clock: the test
	// hands it each reading, so a sample is exactly one Advance.
	cpu := make(chan time.Duration)
	changes := make(chan string, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options{Clock: clk, CPU: func() time.Duration { return <-cpu }, Log: slog.New(slog.DiscardHandler),
			Narrow: func() { changes <- "narrow" },
			Widen:  func() int { changes <- "widen"; return 2 }})
	}()
	var used time.Duration
	cpu <- used
	step := func(d time.Duration) {
		t.Helper()
		if !clk.WaitForTimers(1, 5*time.Second) {
			t.Fatal("Run did not arm its ticker")
		}
		clk.Advance(Interval)
		used += d
		cpu <- used
	}
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-changes:
			if got != want {
				t.Fatalf("%s, want %s", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s", want)
		}
	}
	step(Interval / 2)
	step(Interval * 9 / 10)
	expect("widen")
	for range lowerSamples {
		step(Interval / 10)
	}
	expect("narrow")
	step(Interval / 2)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
	select {
	case c := <-changes:
		t.Fatalf("an unexpected %s", c)
	default:
	}
}

// Apply: GOMAXPROCS in the environment wins; a number is that count; auto starts on one
// processor and returns the loop (when the runtime's default is more than one).
func TestApply(t *testing.T) {
	defer runtime.SetDefaultGOMAXPROCS()
	log := slog.New(slog.DiscardHandler)
	t.Setenv("GOMAXPROCS", "")
	if run := Apply(Mode{Fixed: 3}, log); run != nil || runtime.GOMAXPROCS(0) != 3 {
		t.Fatalf("--procs 3: %d processors, loop %v", runtime.GOMAXPROCS(0), run != nil)
	}
	runtime.SetDefaultGOMAXPROCS()
	all := runtime.GOMAXPROCS(0)
	if run := Apply(Mode{}, log); run != nil || runtime.GOMAXPROCS(0) != all {
		t.Fatalf("--procs all: %d processors (default %d), loop %v", runtime.GOMAXPROCS(0), all, run != nil)
	}
	run := Apply(Mode{Auto: true}, log)
	switch {
	case all < 2 && (run != nil || runtime.GOMAXPROCS(0) != all):
		t.Fatalf("--procs auto on one processor: %d processors, loop %v", runtime.GOMAXPROCS(0), run != nil)
	case all >= 2 && (run == nil || runtime.GOMAXPROCS(0) != 1):
		t.Fatalf("--procs auto: %d processors, loop %v", runtime.GOMAXPROCS(0), run != nil)
	}
	runtime.SetDefaultGOMAXPROCS()
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	if run := Apply(Mode{Auto: true}, log); run != nil || runtime.GOMAXPROCS(0) != 2 {
		t.Fatalf("with GOMAXPROCS=2 in the environment: %d processors, loop %v", runtime.GOMAXPROCS(0), run != nil)
	}
	if run := Apply(Mode{Fixed: 1}, log); run != nil || runtime.GOMAXPROCS(0) != 2 {
		t.Fatalf("with GOMAXPROCS=2 in the environment, --procs 1: %d processors", runtime.GOMAXPROCS(0))
	}
}
