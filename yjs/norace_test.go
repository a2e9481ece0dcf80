//go:build !race

package yjs

const raceEnabled = false
