//go:build !race

package yws

const raceEnabled = false
