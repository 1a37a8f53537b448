package redlock

import "sync"

// Names returns the Redis lock key, fence counter and release channel of key on every
// node, for a Locker with the given prefix.
func Names(prefix, key string) (lock, fence, channel string) {
	n := (&Locker{opts: Options{Prefix: prefix}}).names(key)
	return n.lock, n.fence, n.channel
}

// HoldAcquire makes phase 1's script to node i wait until release is called, and
// returns release. Tests that use it must not run in parallel with others.
func HoldAcquire(i int) (release func()) {
	gate := make(chan struct{})
	hook := func(node int) {
		if node == i {
			<-gate
		}
	}
	testHookAcquire.Store(&hook)
	var once sync.Once
	return func() {
		once.Do(func() {
			testHookAcquire.Store(nil)
			close(gate)
		})
	}
}
