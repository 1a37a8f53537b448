//go:build race

package redlock_test

// raceEnabled: the race detector is on; allocation counts differ then.
const raceEnabled = true
