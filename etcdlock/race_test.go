//go:build race

package etcdlock_test

// raceEnabled: the race detector is on; sync.Pool drops items at random then, so
// allocation counts are not those of a normal build.
const raceEnabled = true
