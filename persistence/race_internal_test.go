//go:build race

package persistence

// raceEnabled: the tests run with the race detector, under which bbolt's page handling
// costs many times more; the tests that fill catalogs of users' sizes run without it.
const raceEnabled = true
