package redlock

// A release reaches the nodes one by one: Unlock's script runs on each node when
// the node gets to it, and each node publishes the release when it has run it. The
// Locker whose turn it is wakes on the first message, and its TryLock may reach
// some nodes before their release: it then fails for contention, finding the
// released token still there. The rest of the release's messages follow, but they
// announce a release that the Locker has announced already, and a Locker with more
// waiters on the key (its view of the key lives on) would sleep until the next
// release, the turn timer of the Lockers behind it, or the holder's ttl. So the
// Locker remembers the release that last woke its line (keyView.woke); a TryLock
// that fails for contention while the released token is still held on enough
// nodes that their releases can complete a quorum wakes the line again once that
// many more messages of the release came (keyView.retry): one extra attempt, when
// a quorum can be free. (A message that came while the TryLock ran voids the
// TryLock's sighting of that node, so the Wait that follows reads the locks:
// sighting.go.)

// releasing records that a TryLock of key failed for contention after it locked
// locked nodes, finding the tokens with the digests of held on the others: when
// the release that last woke the line is among them, on enough nodes to complete a
// quorum, the line wakes again after as many more messages of it as a quorum needs.
func (l *Locker) releasing(key string, locked int, held []string) {
	l.views.mu.Lock()
	defer l.views.mu.Unlock()
	kv := l.views.m[key]
	if kv == nil || kv.woke == "" {
		return
	}
	k := 0
	for _, d := range held {
		if d == kv.woke {
			k++
		}
	}
	if need := l.quorum - locked; need > 0 && k >= need {
		kv.retry = need
	}
}
