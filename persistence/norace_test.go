//go:build !race

package persistence_test

const raceEnabled = false
