package procs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/nomicore/nomicore/clock"
)

// Mode is what the --procs flag asked for.
type Mode struct {
	// Auto: one processor while that is enough, every core under load (the Governor).
	Auto bool
	// Fixed: exactly this many processors (0 with Auto false: the runtime's default).
	Fixed int
}

// ParseMode reads a --procs value: "auto", "all" (the runtime's default: every core the
// process may use), or a number of processors.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "auto":
		return Mode{Auto: true}, nil
	case "all":
		return Mode{}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return Mode{}, fmt.Errorf("--procs %q: want auto, all, or a number of processors of at least 1", s)
	}
	return Mode{Fixed: n}, nil
}

func (m Mode) String() string {
	switch {
	case m.Auto:
		return "auto"
	case m.Fixed > 0:
		return strconv.Itoa(m.Fixed)
	}
	return "all"
}

// The Governor's thresholds. Raising must be quick (work waits while the one processor is
// saturated), lowering patient (a burst is not over because one sample was quiet).
const (
	// Interval between two samples of the process's CPU time.
	Interval = 100 * time.Millisecond
	// raiseBusyShare: on one processor, a sample in which it was busy at least this share of
	// the time raises the count.
	raiseBusyShare = 0.8
	// lowerBelowCores and lowerSamples: on every core, lowerSamples samples in a row whose
	// CPU time averages less than lowerBelowCores cores bring it back to one.
	lowerBelowCores = 0.4
	lowerSamples    = 30
)

// governor is the Governor's decision, without clocks or the runtime: it is fed one sample
// at a time and says whether the process should run on every core (wide) or on one.
type governor struct {
	wide bool
	// The samples taken on every core since it went wide or since the last full window.
	samples       int
	used, elapsed time.Duration
}

// observe takes one sample — CPU time used during elapsed — and returns whether the process
// should now run wide.
func (g *governor) observe(used, elapsed time.Duration) bool {
	if elapsed <= 0 {
		return g.wide
	}
	if !g.wide {
		if float64(used) >= raiseBusyShare*float64(elapsed) {
			g.wide, g.samples, g.used, g.elapsed = true, 0, 0, 0
		}
		return g.wide
	}
	g.samples++
	g.used += used
	g.elapsed += elapsed
	if g.samples < lowerSamples {
		return true
	}
	if float64(g.used) < lowerBelowCores*float64(g.elapsed) {
		g.wide = false
	}
	g.samples, g.used, g.elapsed = 0, 0, 0
	return g.wide
}

// Options are a Governor's parts; RuntimeOptions gives the real ones.
type Options struct {
	Clock clock.Clock
	// CPU returns the CPU time the process has used so far (user and system, all threads).
	CPU func() time.Duration
	// Narrow puts the process on one processor; Widen gives it the runtime's default count
	// and returns that count.
	Narrow func()
	Widen  func() int
	Log    *slog.Logger
}

// RuntimeOptions are the Governor's real parts: the runtime's processor count and the
// process's CPU time. ok is false where the CPU time cannot be read.
func RuntimeOptions(log *slog.Logger) (o Options, ok bool) {
	if !cpuTimeAvailable {
		return Options{}, false
	}
	return Options{
		Clock:  clock.Real(),
		CPU:    processCPU,
		Narrow: func() { runtime.GOMAXPROCS(1) },
		Widen: func() int {
			runtime.SetDefaultGOMAXPROCS()
			return runtime.GOMAXPROCS(0)
		},
		Log: log,
	}, true
}

// Apply sets the processor count --procs asked for and returns the loop that adapts it
// (nil when nothing adapts): with GOMAXPROCS in the environment, Go's own setting wins and
// is left alone; "all" is the runtime's default; a number is that count; "auto" starts on
// one processor when the runtime's default is more and returns the Governor's loop.
func Apply(m Mode, log *slog.Logger) (run func(ctx context.Context)) {
	if env := os.Getenv("GOMAXPROCS"); env != "" {
		log.Info("processors: GOMAXPROCS is set in the environment, --procs is ignored", slog.String("GOMAXPROCS", env),
			slog.Int("processors", runtime.GOMAXPROCS(0)))
		return nil
	}
	switch {
	case m.Fixed > 0:
		runtime.GOMAXPROCS(m.Fixed)
		return nil
	case !m.Auto:
		return nil
	}
	all := runtime.GOMAXPROCS(0)
	o, ok := RuntimeOptions(log)
	if !ok || all < 2 {
		return nil
	}
	o.Narrow()
	log.Info("processors: one while it is enough, all under load", slog.Int("all", all))
	return func(ctx context.Context) { Run(ctx, o) }
}

// Run is the Governor's loop: the process is on one processor when it starts (Apply put it
// there); every Interval it samples the process's CPU time and narrows or widens the count
// as governor decides, until ctx ends, leaving the count as it is then.
func Run(ctx context.Context, o Options) {
	var g governor
	tick := clock.NewTicker(o.Clock, Interval)
	defer tick.Stop()
	lastAt, lastCPU := o.Clock.Now(), o.CPU()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now, cpu := o.Clock.Now(), o.CPU()
		was := g.wide
		wide := g.observe(cpu-lastCPU, now.Sub(lastAt))
		lastCPU, lastAt = cpu, now
		switch {
		case wide && !was:
			n := o.Widen()
			o.Log.Debug("processors: the one processor is saturated, using all", slog.Int("processors", n))
		case !wide && was:
			o.Narrow()
			o.Log.Debug("processors: the load fits one processor again", slog.Int("processors", 1))
		}
	}
}
