package redislock

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timings of a Locker's pub/sub hub.
const (
	// hubIdle is how long the hub keeps its pub/sub connection after its last Wait
	// ended, so that the Waits of a wait loop (TryLock, Wait, TryLock, Wait, ...)
	// find their channel subscribed.
	hubIdle = 5 * time.Second
	// topicIdle is how long a channel without waiters stays subscribed while the
	// hub has waiters on other channels.
	topicIdle = time.Second
	// hubOpTimeout bounds one SUBSCRIBE, UNSUBSCRIBE or PING that the hub sends
	// (each may have to dial).
	hubOpTimeout = 5 * time.Second
	// hubPing: when nothing arrived on the connection for this long, the hub sends
	// a PING; when nothing arrives for as long again, it takes the connection for
	// dead and replaces it.
	hubPing = 5 * time.Second
	// Backoff of a hub whose connection keeps failing.
	hubMinBackoff = 10 * time.Millisecond
	hubMaxBackoff = time.Second
)

// A hub multiplexes the Waits of one Locker over one pub/sub connection: it
// subscribes each release channel once, however many Waits want it, and keeps it
// subscribed between the Waits of a wait loop. The connection is opened on demand
// and closed hubIdle after the last Wait ended, by Locker.Close, or when the
// client is closed.
//
// It also lets a Wait skip the check that the key is held after subscribing: a
// TryLock that starts while the key's channel is subscribed, and finds the key
// held, is such a check, as long as no message arrived on the channel, and the
// connection did not break, since it started (see peek, saw and check).
type hub struct {
	client redis.UniversalClient
	ping   time.Duration // hubPing; tests shorten it before the first Wait
	live   atomic.Bool   // topics is not empty: lets TryLock skip the lock

	mu      sync.Mutex
	ps      *redis.PubSub // nil while closed
	epoch   uint64        // incremented whenever messages may have been missed
	quit    chan struct{} // closed to stop ps's reader and writer
	done    chan struct{} // closed when ps's reader has returned
	topics  map[string]*topic
	waiters int
	idle    *time.Timer
	ops     []hubOp       // SUBSCRIBE, UNSUBSCRIBE and PING to send, in order
	kick    chan struct{} // capacity 1: ops has work
}

// The kinds of a hubOp.
const (
	opSubscribe = iota
	opUnsubscribe
	opPing
)

// A hubOp is a command for the writer to send on ps.
type hubOp struct {
	ps      *redis.PubSub
	kind    int
	channel string
}

// A topic is one channel of a hub.
type topic struct {
	waiters   map[*listener]struct{}
	active    bool   // the server confirmed the subscription on the current connection
	seq       uint64 // messages received on the channel
	idleSince time.Time
	seen      sighting
}

// A sighting is a TryLock that found the key held while the channel was active.
type sighting struct {
	ok         bool
	epoch, seq uint64    // the hub's epoch and the topic's seq before it was sent
	until      time.Time // when the holder's time to live surely ended
}

// A hubToken is what peek returns: the state of a channel before a TryLock is sent.
type hubToken struct{ epoch, seq uint64 }

// A listener is one Wait: it learns of its subscription on ready and of a message,
// or of a broken connection, on woke; neither ever blocks the hub.
type listener struct {
	ready chan error    // capacity 1: nil once subscribed, or the SUBSCRIBE's error
	woke  chan struct{} // capacity 1
}

func (ls *listener) confirm(err error) {
	select {
	case ls.ready <- err:
	default: // already told
	}
}

func (ls *listener) wake() {
	select {
	case ls.woke <- struct{}{}:
	default:
	}
}

// register adds a listener of channel, subscribing to it if needed.
func (h *hub) register(channel string) *listener {
	ls := &listener{ready: make(chan error, 1), woke: make(chan struct{}, 1)}
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
		h.live.Store(true)
		h.send(hubOp{ps: h.ps, kind: opSubscribe, channel: channel})
	}
	t.waiters[ls] = struct{}{}
	if t.active {
		ls.confirm(nil)
	}
	return ls
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
	// next "subscribe" confirmation for such a channel answers the next SUBSCRIBE.
	for ch, t := range h.topics {
		if len(t.waiters) == 0 && t.active && now.Sub(t.idleSince) > topicIdle {
			delete(h.topics, ch)
			h.send(hubOp{ps: h.ps, kind: opUnsubscribe, channel: ch})
		}
	}
	h.live.Store(len(h.topics) > 0)
	if h.waiters == 0 && h.ps != nil {
		ps := h.ps
		h.idle = time.AfterFunc(hubIdle, func() { h.closeIdle(ps) })
	}
}

// peek returns the state of channel before a TryLock is sent, if the channel is
// subscribed.
func (h *hub) peek(channel string) (hubToken, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[channel]; t != nil && t.active {
		return hubToken{h.epoch, t.seq}, true
	}
	return hubToken{}, false
}

// saw records that a TryLock sent after peek returned tok found the key of channel
// held with pttl to live (as PTTL reports it: -1 for no time to live).
func (h *hub) saw(channel string, tok hubToken, pttl time.Duration) {
	// The reply came after the server read pttl: counting from now, the timer
	// fires after the server's expiry. PTTL truncates to the millisecond: add one.
	until := time.Now().Add(noTTLBound)
	if pttl >= 0 {
		until = time.Now().Add(pttl + time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[channel]; t != nil && t.active && h.epoch == tok.epoch {
		t.seen = sighting{ok: true, epoch: tok.epoch, seq: tok.seq, until: until}
	}
}

// check tells a Wait whose listener of channel is subscribed what a TryLock saw:
// ok when one found the key held while the channel was subscribed without a break
// since; then released reports a message since it was sent (the key may be free),
// and until bounds the holder's time to live. A message after check wakes the
// listener.
func (h *hub) check(channel string) (until time.Time, released, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	if t == nil || !t.active || !t.seen.ok || t.seen.epoch != h.epoch {
		return time.Time{}, false, false
	}
	return t.seen.until, t.seq != t.seen.seq, true
}

// start opens the hub's PubSub (no request yet) and its reader and writer. h.mu
// must be held.
func (h *hub) start() {
	// No channel yet: this makes no request and cannot fail.
	ps := h.client.Subscribe(context.Background())
	h.ps = ps
	h.epoch++
	h.quit = make(chan struct{})
	h.done = make(chan struct{})
	if h.topics == nil {
		h.topics = make(map[string]*topic)
	}
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

// write sends the queued commands in order, outside h.mu (they may dial while they
// hold the PubSub's lock), until quit.
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
			switch op.kind {
			case opSubscribe:
				if err := op.ps.Subscribe(ctx, op.channel); err != nil {
					h.failed(op.ps, op.channel, err)
				}
			case opUnsubscribe:
				_ = op.ps.Unsubscribe(ctx, op.channel)
			case opPing:
				_ = op.ps.Ping(ctx)
			}
			cancel()
		}
	}
}

// missed records that messages on ps may have been lost: every topic needs a new
// confirmation, every sighting is void, and every listener is woken (its key may
// have been released meanwhile). h.mu must be held.
func (h *hub) missed() {
	h.epoch++
	for _, t := range h.topics {
		t.active = false
		t.seen = sighting{}
		for ls := range t.waiters {
			ls.wake()
		}
	}
}

// stopLocked detaches the current PubSub and returns what is needed to close it;
// the listeners are woken. h.mu must be held.
func (h *hub) stopLocked() (*redis.PubSub, chan struct{}) {
	ps, done := h.ps, h.done
	if ps == nil {
		return nil, nil
	}
	h.missed()
	close(h.quit)
	h.ps, h.quit, h.done, h.ops, h.kick = nil, nil, nil, nil, nil
	h.topics, h.waiters = nil, 0
	h.live.Store(false)
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
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

// close closes the hub's connection and waits for its reader. The Waits in
// progress return (their keys may be free); a later Wait opens a new connection.
func (h *hub) close() {
	h.mu.Lock()
	ps, done := h.stopLocked()
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
}

// replace replaces ps, whose connection seems dead, with a new PubSub that
// subscribes to every channel again.
func (h *hub) replace(ps *redis.PubSub) {
	h.mu.Lock()
	if h.ps != ps {
		h.mu.Unlock()
		return
	}
	h.missed()
	close(h.quit)
	h.start()
	for ch := range h.topics {
		h.send(hubOp{ps: h.ps, kind: opSubscribe, channel: ch})
	}
	h.mu.Unlock()
	_ = ps.Close()
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
			ls.confirm(err)
		}
	}
}

// read receives ps's messages until ps is no longer the hub's.
func (h *hub) read(ps *redis.PubSub, quit, done chan struct{}) {
	defer close(done)
	backoff := hubMinBackoff
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(context.Background(), h.ping)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if !pinged {
					pinged = true
					h.mu.Lock()
					if h.ps == ps {
						h.send(hubOp{ps: ps, kind: opPing})
					}
					h.mu.Unlock()
					continue
				}
				// Not even a PONG: the connection is dead (a blackhole does not
				// break it). Its replacement has a reader of its own.
				h.replace(ps)
				return
			}
			h.mu.Lock()
			if h.ps != ps {
				h.mu.Unlock()
				return // closed or replaced
			}
			// The connection broke: go-redis reconnects and subscribes again on
			// the next Receive, but messages may have been lost meanwhile.
			h.missed()
			if errors.Is(err, redis.ErrClosed) { // the client was closed
				h.stopLocked()
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
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
		backoff, pinged = hubMinBackoff, false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			h.mu.Lock()
			if t := h.topics[m.Channel]; h.ps == ps && t != nil && !t.active {
				t.active = true
				for ls := range t.waiters {
					ls.confirm(nil)
				}
			}
			h.mu.Unlock()
		case *redis.Message:
			h.mu.Lock()
			if t := h.topics[m.Channel]; h.ps == ps && t != nil {
				t.seq++
				for ls := range t.waiters {
					ls.wake()
				}
			}
			h.mu.Unlock()
		}
	}
}
