//go:build race

package e2e

// raceEnabled: the binaries under test are built with the race detector too.
const raceEnabled = true
