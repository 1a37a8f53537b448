package redisx

import "sync"

// An Inbox keeps the payloads of the messages that reach a Listener, for a Wait
// that decides itself which messages matter (redlock's: only the release of a lock
// it saw held). A Listener made with NewInboxListener puts every message in its
// Inbox and signals Ready instead of Woke, so Woke then means only that messages may
// have been missed (a connection broke, was replaced or closed). Messages that
// arrive before the Wait looks (between Register and its read of the locks) are
// kept until Take, not lost.
type Inbox struct {
	mu    sync.Mutex
	msgs  []string
	ready chan struct{} // capacity 1
}

// inboxMax bounds the payloads an Inbox keeps between two Takes; beyond it the
// oldest are dropped and an empty payload (which every Wait takes for "any
// release") stands for them.
const inboxMax = 64

// NewInboxListener returns a Listener for Waits on up to hubs hubs whose messages
// go to its Inbox.
func NewInboxListener(hubs int) *Listener {
	ls := NewListener(hubs)
	ls.inbox = &Inbox{ready: make(chan struct{}, 1)}
	return ls
}

// Inbox returns the Listener's Inbox, nil unless NewInboxListener made it.
func (ls *Listener) Inbox() *Inbox { return ls.inbox }

// message delivers a message's payload: to the Inbox when there is one, else as a
// wake-up.
func (ls *Listener) message(payload string) {
	in := ls.inbox
	if in == nil {
		ls.wake()
		return
	}
	in.mu.Lock()
	if len(in.msgs) >= inboxMax {
		in.msgs = append(in.msgs[:0], "")
	}
	in.msgs = append(in.msgs, payload)
	in.mu.Unlock()
	select {
	case in.ready <- struct{}{}:
	default:
	}
}

// Ready is ready when messages may be waiting for Take.
func (in *Inbox) Ready() <-chan struct{} { return in.ready }

// Take returns the payloads received since the last Take, oldest first.
func (in *Inbox) Take() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	m := in.msgs
	in.msgs = nil
	return m
}
