//go:build race

package cluster

// raceEnabled: the tests run with the race detector, which makes every byte of a large
// update cost a lot more.
const raceEnabled = true
