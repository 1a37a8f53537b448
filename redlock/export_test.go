package redlock

// Names returns the Redis lock key, fence counter and release channel of key on every
// node, for a Locker with the given prefix.
func Names(prefix, key string) (lock, fence, channel string) {
	n := (&Locker{opts: Options{Prefix: prefix}}).names(key)
	return n.lock, n.fence, n.channel
}
