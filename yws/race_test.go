//go:build race

package yws

// raceEnabled: the race detector makes every struct operation many times slower; the join
// storm test runs on a smaller document under it.
const raceEnabled = true
