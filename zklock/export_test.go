package zklock

// ReapWaiterID exposes reapWaiterID to the tests: it deletes the waiter nodes of
// keyPath with protected id.
func (l *Locker) ReapWaiterID(keyPath, id string) { l.reapWaiterID(keyPath, id) }

// WaitNodePrefix exposes waitNodePrefix: the path that an ephemeral-sequential create
// of waiter id under keyPath extends with its sequence number.
func WaitNodePrefix(keyPath, id string) string { return waitNodePrefix(keyPath, id) }
