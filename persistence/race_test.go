//go:build race

package persistence_test

// raceEnabled: the race detector also turns on checkptr, under which bbolt's unsafe
// reinterpretation of a damaged page is a fatal error instead of a recoverable panic.
const raceEnabled = true
