//go:build race

package yjs

// raceEnabled: the race detector makes every struct operation many times slower; the
// largest tests run smaller under it and at full size in make test's pass without it.
const raceEnabled = true
