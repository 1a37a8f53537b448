package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timings of a hub.
const (
	// hubIdle is how long a hub keeps its pub/sub connection after its last Wait
	// ended, so that a Wait that follows soon (the usual pattern: TryLock, Wait,
	// TryLock, Wait) finds its channel subscribed.
	hubIdle = 5 * time.Second
	// topicIdle is how long a channel without waiters stays subscribed on a hub
	// that has other waiters.
	topicIdle = time.Second
	// hubOpTimeout bounds a SUBSCRIBE or UNSUBSCRIBE that the hub sends (they may
	// dial).
	hubOpTimeout = 5 * time.Second
	// Backoff of a hub whose connection keeps failing.
	hubMinBackoff = 10 * time.Millisecond
	hubMaxBackoff = time.Second
)

// A hub multiplexes the subscriptions of every Wait of one Locker on one node over a
// single pub/sub connection, opened on demand and closed hubIdle after the last Wait
// ended (or by Locker.Close, or when the client is closed).
type hub struct {
	c redis.UniversalClient
	i int // the node's index

	mu      sync.Mutex
	ps      *redis.PubSub // nil while closed
	quit    chan struct{} // closed to stop ps's reader and writer
	done    chan struct{} // closed when ps's reader has returned
	topics  map[string]*topic
	waiters int
	idle    *time.Timer
	ops     []hubOp       // SUBSCRIBE and UNSUBSCRIBE to send, in order
	kick    chan struct{} // capacity 1: ops has work
}

// A hubOp is a SUBSCRIBE (sub) or UNSUBSCRIBE of channel on ps.
type hubOp struct {
	ps      *redis.PubSub
	sub     bool
	channel string
}

// A topic is one channel of a hub.
type topic struct {
	waiters   map[*listener]struct{}
	active    bool // the server confirmed the subscription on the current connection
	idleSince time.Time
}

// A listener is one Wait: it is told of confirmations on confirmed and of messages
// on woke, never blocking the hub.
type listener struct {
	woke      chan struct{}     // capacity 1
	confirmed chan confirmation // capacity: one per node and more
}

// A confirmation reports that node i's subscription was confirmed (err == nil) or
// failed.
type confirmation struct {
	i   int
	err error
}

func (ls *listener) confirm(c confirmation) {
	select {
	case ls.confirmed <- c:
	default: // Wait no longer counts confirmations
	}
}

func (ls *listener) wake() {
	select {
	case ls.woke <- struct{}{}:
	default:
	}
}

// register adds ls as a listener of channel, subscribing to it if needed. ls is told
// on confirmed when the subscription is (or already was) confirmed.
func (h *hub) register(channel string, ls *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ps == nil {
		h.start()
	}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	h.waiters++
	t := h.topics[channel]
	if t == nil {
		t = &topic{waiters: make(map[*listener]struct{})}
		h.topics[channel] = t
		h.send(hubOp{ps: h.ps, sub: true, channel: channel})
	}
	t.waiters[ls] = struct{}{}
	if t.active {
		ls.confirm(confirmation{h.i, nil})
	}
}

// unregister removes ls as a listener of channel.
func (h *hub) unregister(channel string, ls *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	if t == nil {
		return
	}
	if _, ok := t.waiters[ls]; !ok {
		return
	}
	delete(t.waiters, ls)
	h.waiters--
	now := time.Now()
	if len(t.waiters) == 0 {
		t.idleSince = now
	}
	// Unsubscribe from channels idle for a while. Only confirmed ones: then the
	// next "subscribe" confirmation for that channel answers the next SUBSCRIBE.
	for ch, t := range h.topics {
		if len(t.waiters) == 0 && t.active && now.Sub(t.idleSince) > topicIdle {
			delete(h.topics, ch)
			h.send(hubOp{ps: h.ps, channel: ch})
		}
	}
	if h.waiters == 0 && h.ps != nil {
		ps := h.ps
		h.idle = time.AfterFunc(hubIdle, func() { h.closeIdle(ps) })
	}
}

// start opens the hub's PubSub (no request yet) and its reader. h.mu must be held.
func (h *hub) start() {
	// No channel yet: this makes no request and cannot fail.
	ps := h.c.Subscribe(context.Background())
	h.ps = ps
	h.quit = make(chan struct{})
	h.done = make(chan struct{})
	h.topics = make(map[string]*topic)
	h.ops = nil
	h.kick = make(chan struct{}, 1)
	go h.read(ps, h.quit, h.done)
	go h.write(h.quit, h.kick)
}

// send queues op for the writer. h.mu must be held.
func (h *hub) send(op hubOp) {
	h.ops = append(h.ops, op)
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// write sends the queued SUBSCRIBE and UNSUBSCRIBE commands in order, outside h.mu
// (they may dial while they hold the PubSub's lock), until quit.
func (h *hub) write(quit, kick chan struct{}) {
	for {
		select {
		case <-quit:
			return
		case <-kick:
		}
		h.mu.Lock()
		ops := h.ops
		h.ops = nil
		h.mu.Unlock()
		for _, op := range ops {
			ctx, cancel := context.WithTimeout(context.Background(), hubOpTimeout)
			if op.sub {
				if err := op.ps.Subscribe(ctx, op.channel); err != nil {
					h.failed(op.ps, op.channel, err)
				}
			} else {
				_ = op.ps.Unsubscribe(ctx, op.channel)
			}
			cancel()
		}
	}
}

// stopLocked detaches the current PubSub and returns what is needed to close it.
// h.mu must be held.
func (h *hub) stopLocked() (*redis.PubSub, chan struct{}) {
	ps, done := h.ps, h.done
	if ps == nil {
		return nil, nil
	}
	close(h.quit)
	h.ps, h.quit, h.done, h.topics, h.waiters, h.ops, h.kick = nil, nil, nil, nil, 0, nil, nil
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	// Every listener left falls back on its time-to-live bound.
	return ps, done
}

// closeIdle closes ps if it is still the hub's and no Wait uses it.
func (h *hub) closeIdle(ps *redis.PubSub) {
	h.mu.Lock()
	if h.ps != ps || h.waiters > 0 {
		h.mu.Unlock()
		return
	}
	ps, _ = h.stopLocked()
	h.mu.Unlock()
	_ = ps.Close()
}

// close closes the hub's connection and waits for its reader.
func (h *hub) close() {
	h.mu.Lock()
	ps, done := h.stopLocked()
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
}

// failed reports a failed SUBSCRIBE to the listeners of channel on ps.
func (h *hub) failed(ps *redis.PubSub, channel string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ps != ps {
		return
	}
	if t := h.topics[channel]; t != nil && !t.active {
		for ls := range t.waiters {
			ls.confirm(confirmation{h.i, err})
		}
	}
}

// read receives ps's messages until ps is closed or quit.
func (h *hub) read(ps *redis.PubSub, quit, done chan struct{}) {
	defer close(done)
	backoff := hubMinBackoff
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			h.mu.Lock()
			if h.ps == ps {
				// The connection broke: go-redis reconnects and subscribes again
				// on the next Receive; until confirmed, nothing is subscribed.
				for _, t := range h.topics {
					t.active = false
				}
				if errors.Is(err, redis.ErrClosed) {
					h.stopLocked()
				}
			}
			h.mu.Unlock()
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			t := time.NewTimer(backoff)
			select {
			case <-quit:
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, hubMaxBackoff)
			continue
		}
		backoff = hubMinBackoff
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			h.mu.Lock()
			if t := h.topics[m.Channel]; h.ps == ps && t != nil && !t.active {
				t.active = true
				for ls := range t.waiters {
					ls.confirm(confirmation{h.i, nil})
				}
			}
			h.mu.Unlock()
		case *redis.Message:
			h.mu.Lock()
			if t := h.topics[m.Channel]; h.ps == ps && t != nil {
				for ls := range t.waiters {
					ls.wake()
				}
			}
			h.mu.Unlock()
		}
	}
}
