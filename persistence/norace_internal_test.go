//go:build !race

package persistence

const raceEnabled = false
