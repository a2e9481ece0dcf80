// Package procs runs a hub or peer on as many processors as its load needs.
//
// A relay hands most of its work from one goroutine to another: a connection's reader to
// its owner, the owner to the document's registry, the registry to every receiving
// connection, an owner to its writer. With several processors, each hand-off to a goroutine
// that is not running wakes an idle processor's thread, which looks for work and goes back
// to sleep: on a 2-core machine under a relay load that needs well under one core, that
// costs about a fifth of the process's CPU and buys nothing. On one processor the same
// hand-off is a queue push.
//
// The Governor therefore keeps the process on one processor (runtime.GOMAXPROCS(1)) while
// one is enough, raises it to the runtime's default (every core the process may use) as
// soon as the one processor is nearly always busy, and brings it back to one after the
// load has stayed low for a few seconds. The two thresholds are far apart, so a steady load
// settles on one side: a load that keeps one processor 80 % busy uses well over 40 % of a
// core on several. Changing the count stops the world for a moment (tens of microseconds),
// at most once per sample.
//
// It measures the process's own CPU time (getrusage); where that is not available, and
// when GOMAXPROCS is set in the environment or a fixed count is asked for, the count is left
// as it is.
package procs
