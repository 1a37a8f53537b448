package redisx

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

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

// start opens the hub's PubSub (no request yet) and its reader and writer. h.mu
// must be held.
func (h *Hub) start() {
	// No channel yet: this makes no request and cannot fail.
	ps := h.client.Subscribe(context.Background())
	h.ps = ps
	h.epoch++
	h.quit = make(chan struct{})
	if h.topics == nil {
		h.topics = make(map[string]*topic)
	}
	h.ops = nil
	h.kick = make(chan struct{}, 1)
	quit, kick := h.quit, h.kick
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		h.read(ps, quit)
	}()
	go func() {
		defer h.wg.Done()
		h.write(quit, kick)
	}()
}

// send queues op for the writer. h.mu must be held.
func (h *Hub) send(op hubOp) {
	h.ops = append(h.ops, op)
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// write sends the queued commands in order, outside h.mu (they may dial while they
// hold the PubSub's lock), until quit.
func (h *Hub) write(quit, kick chan struct{}) {
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
			ctx, cancel := context.WithTimeout(context.Background(), h.cfg.OpTimeout)
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

// missed records that messages may have been lost: every topic needs a new
// confirmation, every sighting is void, and every listener is woken (its key may
// have been released meanwhile). h.mu must be held.
func (h *Hub) missed() {
	h.epoch++
	for _, t := range h.topics {
		t.active = false
		t.seen = sighting{}
		for ls := range t.waiters {
			ls.wake()
		}
	}
}

// stopLocked detaches the current PubSub, if any, and returns it for the caller to
// close (its reader then ends); the listeners are woken and the topics dropped.
// h.mu must be held.
func (h *Hub) stopLocked() *redis.PubSub {
	ps := h.ps
	if ps == nil {
		return nil
	}
	h.missed()
	close(h.quit)
	h.ps, h.quit, h.ops, h.kick = nil, nil, nil, nil
	h.topics, h.waiters = nil, 0
	h.live.Store(false)
	h.disarmIdle()
	return ps
}

// replace replaces ps, whose connection seems dead, with a new PubSub that
// subscribes to every channel again; or just closes it when no Wait uses the hub.
func (h *Hub) replace(ps *redis.PubSub) {
	h.mu.Lock()
	if h.ps != ps {
		h.mu.Unlock()
		return
	}
	if h.waiters == 0 {
		h.stopLocked()
		h.mu.Unlock()
		_ = ps.Close()
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
func (h *Hub) failed(ps *redis.PubSub, channel string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ps != ps {
		return
	}
	if t := h.topics[channel]; t != nil && !t.active {
		for ls := range t.waiters {
			ls.confirm(Confirmation{Node: h.node, Err: err})
		}
	}
}

// read receives ps's messages until ps is no longer the hub's.
func (h *Hub) read(ps *redis.PubSub, quit chan struct{}) {
	backoff := hubMinBackoff
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(context.Background(), h.cfg.Ping)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if pinged {
					// Not even a PONG: the connection is dead (a blackhole does
					// not break it). Its replacement has a reader of its own.
					h.replace(ps)
					return
				}
				pinged = true
				h.ping(ps)
				continue
			}
			if !h.broken(ps, err, quit, backoff) {
				return
			}
			backoff = min(2*backoff, hubMaxBackoff)
			continue
		}
		backoff, pinged = hubMinBackoff, false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.subscribed(ps, m.Channel)
			}
		case *redis.Message:
			h.received(ps, m)
		}
	}
}

// ping queues a PING on ps, after ps was silent for cfg.Ping.
func (h *Hub) ping(ps *redis.PubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ps == ps {
		h.send(hubOp{ps: ps, kind: opPing})
	}
}

// broken handles the error err of a receive on ps other than a timeout: messages
// may have been lost. It reports whether the reader goes on (go-redis reconnects
// and subscribes again on the next receive), after backoff or until quit; false when
// ps is no longer the hub's, or its client was closed.
func (h *Hub) broken(ps *redis.PubSub, err error, quit chan struct{}, backoff time.Duration) bool {
	h.mu.Lock()
	if h.ps != ps {
		h.mu.Unlock()
		return false // closed or replaced
	}
	h.missed()
	if errors.Is(err, redis.ErrClosed) { // the client was closed
		ps := h.stopLocked()
		h.mu.Unlock()
		_ = ps.Close()
		return false
	}
	h.mu.Unlock()
	t := time.NewTimer(backoff)
	defer t.Stop()
	select {
	case <-quit:
		return false
	case <-t.C:
		return true
	}
}

// subscribed confirms the subscription of channel on ps to its listeners.
func (h *Hub) subscribed(ps *redis.PubSub, channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[channel]; h.ps == ps && t != nil && !t.active {
		t.active = true
		for ls := range t.waiters {
			ls.confirm(Confirmation{Node: h.node})
		}
	}
}

// received hands the message m of ps to the hub's hooks or its channel's listeners.
func (h *Hub) received(ps *redis.PubSub, m *redis.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[m.Channel]
	if h.ps != ps || t == nil {
		return
	}
	t.seq++
	t.recent[t.seq%recentMessages] = m.Payload
	switch {
	case len(t.waiters) == 0 && h.cfg.Unheard != nil:
		h.cfg.Unheard(h.node, m.Channel, m.Payload)
	case h.cfg.Released != nil:
		h.cfg.Released(m.Channel)
	default:
		for ls := range t.waiters {
			ls.message(m.Payload)
		}
	}
}
