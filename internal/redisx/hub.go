package redisx

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
)

// Default timings of a Hub (see HubConfig).
const (
	// DefaultHubIdle is how long a hub keeps its pub/sub connection after its last
	// Wait ended, so that the Waits of a wait loop (TryLock, Wait, TryLock, Wait, ...)
	// find their channel subscribed.
	DefaultHubIdle = 5 * time.Second
	// DefaultTopicIdle is how long a channel without waiters stays subscribed while
	// the hub has waiters on other channels.
	DefaultTopicIdle = time.Second
	// DefaultHubOpTimeout bounds one SUBSCRIBE, UNSUBSCRIBE or PING that the hub
	// sends (each may have to dial).
	DefaultHubOpTimeout = 5 * time.Second
	// DefaultHubPing: when nothing arrived on the connection for this long, the hub
	// sends a PING; when nothing arrives for as long again, it takes the connection
	// for dead (a NAT or load balancer that dropped it says nothing) and replaces it.
	DefaultHubPing = 5 * time.Second
	// Backoff of a hub whose connection keeps failing.
	hubMinBackoff = 10 * time.Millisecond
	hubMaxBackoff = time.Second
)

// HubConfig are the timings of a Hub; each zero field means its default. Tests
// shorten them.
type HubConfig struct {
	Ping      time.Duration // DefaultHubPing
	Idle      time.Duration // DefaultHubIdle
	TopicIdle time.Duration // DefaultTopicIdle
	OpTimeout time.Duration // DefaultHubOpTimeout
	// Released, when set, receives each release message (by channel) instead of the
	// channel's listeners: the Locker wakes its Waits one at a time (internal/waitq).
	// It is called with the hub's lock held and must not block or call the hub.
	// Listeners are still woken when messages may have been missed, and on Close.
	Released func(channel string)
	// Unheard, when set, receives each message that comes on a channel that is
	// still subscribed but has no listener (its last one left less than TopicIdle
	// ago), with the hub's node index: redlock passes on a turn that came to a
	// Locker with no Wait left on the key. It is called with the hub's lock held
	// and must not block or call the hub.
	Unheard func(node int, channel, payload string)
}

func (c HubConfig) withDefaults() HubConfig {
	if c.Ping <= 0 {
		c.Ping = DefaultHubPing
	}
	if c.Idle <= 0 {
		c.Idle = DefaultHubIdle
	}
	if c.TopicIdle <= 0 {
		c.TopicIdle = DefaultTopicIdle
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = DefaultHubOpTimeout
	}
	return c
}

// A Hub multiplexes the Waits of one Locker on one Redis deployment (redislock's
// server or Cluster, one of redlock's masters) over one pub/sub connection: it
// subscribes each release channel once, however many Waits want it, and keeps it
// subscribed between the Waits of a wait loop. The connection is opened on demand and
// closed HubConfig.Idle after the last Wait ended (whichever connection the hub has
// by then), by Close, or when the client is closed.
//
// The hub watches its connection: after HubConfig.Ping of silence it sends a PING,
// and after as long again without an answer it replaces the connection, which a
// NAT or load balancer may have dropped without a word. Whenever messages may have
// been missed (the connection broke, was replaced or closed) it wakes every
// listener: a release may have been lost.
//
// It also lets a Wait skip the check that the key is held after subscribing: a
// TryLock that starts while the key's channel is subscribed, and finds the key held,
// is such a check, as long as no message arrived on the channel, the connection did
// not break, and the subscription is still the same one, since it started (see Peek,
// Saw and Check).
type Hub struct {
	client redis.UniversalClient
	node   int // reported in Confirmations
	cfg    HubConfig
	live   atomic.Bool    // topics is not empty: lets TryLock skip the lock
	wg     sync.WaitGroup // the reader and writer of every connection

	mu      sync.Mutex
	closed  bool
	ps      *redis.PubSub // nil while no connection is open
	epoch   uint64        // incremented whenever messages may have been missed
	quit    chan struct{} // closed to stop ps's reader and writer
	topics  map[string]*topic
	waiters int
	idle    *time.Timer
	idleGen uint64 // identifies the armed idle timer
	ops     []hubOp
	kick    chan struct{} // capacity 1: ops has work
}

// NewHub returns a Hub over client, whose confirmations name node. It opens no
// connection until the first Register.
func NewHub(client redis.UniversalClient, node int, cfg HubConfig) *Hub {
	return &Hub{client: client, node: node, cfg: cfg.withDefaults()}
}

// A topic is one channel of a hub.
type topic struct {
	waiters   map[*Listener]struct{}
	active    bool                   // the server confirmed the subscription on the current connection
	seq       uint64                 // messages received on the channel
	recent    [recentMessages]string // payloads of the last messages, by seq
	idleSince time.Time
	seen      sighting
}

// recentMessages is how many payloads a topic keeps for Check.
const recentMessages = 8

// A sighting is a TryLock that found the key held while the channel was active.
type sighting struct {
	ok     bool
	tok    Token
	until  time.Time // when the holder's time to live surely ended
	holder string    // the payload of the holder's release; "": any message
}

// A Token is what Peek returns: the state of a channel before a TryLock is sent.
type Token struct {
	epoch uint64
	topic *topic // the subscription: a channel dropped and subscribed again is another
	seq   uint64
}

// A Listener is one Wait, on one or more hubs. It learns of each hub's
// subscription on Confirmed and of a message, a broken connection or Close on Woke;
// neither ever blocks a hub.
type Listener struct {
	confirmed chan Confirmation
	woke      chan struct{} // capacity 1
	inbox     *Inbox        // nil: a message wakes (see NewInboxListener)
}

// A Confirmation reports that a hub's subscription is confirmed (Err == nil) or
// that its SUBSCRIBE failed.
type Confirmation struct {
	Node int // the hub's node
	Err  error
}

// NewListener returns a Listener for Waits on up to hubs hubs.
func NewListener(hubs int) *Listener {
	return &Listener{confirmed: make(chan Confirmation, 2*hubs), woke: make(chan struct{}, 1)}
}

// Confirmed delivers the hubs' confirmations.
func (ls *Listener) Confirmed() <-chan Confirmation { return ls.confirmed }

// Woke is ready when a message arrived on the channel, or when one may have been
// missed (a connection broke, was replaced, or a hub closed).
func (ls *Listener) Woke() <-chan struct{} { return ls.woke }

func (ls *Listener) confirm(c Confirmation) {
	select {
	case ls.confirmed <- c:
	default: // the Wait no longer counts confirmations
	}
}

func (ls *Listener) wake() {
	select {
	case ls.woke <- struct{}{}:
	default:
	}
}

// Register adds ls as a listener of channel, subscribing to it if needed; ls is
// told on Confirmed when the subscription is (or already was) confirmed. It returns
// distlock.ErrClosed after Close. Every Register must be followed by Unregister.
func (h *Hub) Register(channel string, ls *Listener) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return distlock.ErrClosed
	}
	if h.ps == nil {
		h.start()
	}
	h.disarmIdle()
	h.waiters++
	t := h.topics[channel]
	if t == nil {
		t = &topic{waiters: make(map[*Listener]struct{})}
		h.topics[channel] = t
		h.live.Store(true)
		h.send(hubOp{ps: h.ps, kind: opSubscribe, channel: channel})
	}
	t.waiters[ls] = struct{}{}
	if t.active {
		ls.confirm(Confirmation{Node: h.node})
	}
	return nil
}

// Unregister removes ls as a listener of channel.
func (h *Hub) Unregister(channel string, ls *Listener) {
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
		if len(t.waiters) == 0 && t.active && now.Sub(t.idleSince) > h.cfg.TopicIdle {
			delete(h.topics, ch)
			h.send(hubOp{ps: h.ps, kind: opUnsubscribe, channel: ch})
		}
	}
	h.live.Store(len(h.topics) > 0)
	if h.waiters == 0 && h.ps != nil {
		h.armIdle()
	}
}

// armIdle arms the timer that closes the connection, whichever it is by then, when
// no Wait used the hub for HubConfig.Idle. h.mu must be held.
func (h *Hub) armIdle() {
	h.disarmIdle()
	gen := h.idleGen
	h.idle = time.AfterFunc(h.cfg.Idle, func() { h.closeIdle(gen) })
}

// disarmIdle stops the idle timer; one that fires anyway finds its generation
// outdated. h.mu must be held.
func (h *Hub) disarmIdle() {
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	h.idleGen++
}

// closeIdle closes the hub's connection if the idle timer of generation gen is
// still the armed one.
func (h *Hub) closeIdle(gen uint64) {
	h.mu.Lock()
	if h.idleGen != gen || h.waiters > 0 || h.ps == nil {
		h.mu.Unlock()
		return
	}
	ps := h.stopLocked()
	h.mu.Unlock()
	_ = ps.Close()
}

// Live reports whether some channel is subscribed (or being subscribed): only then
// can Peek find one.
func (h *Hub) Live() bool { return h.live.Load() }

// Peek returns the state of channel before a TryLock is sent, if the channel is
// subscribed.
func (h *Hub) Peek(channel string) (Token, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[channel]; t != nil && t.active {
		return Token{epoch: h.epoch, topic: t, seq: t.seq}, true
	}
	return Token{}, false
}

// Saw records that a TryLock sent after Peek returned tok found the key of channel
// held with pttl to live (as PTTL reports it: negative for no time to live). It is
// kept only while the subscription that tok saw is still the channel's, unbroken.
func (h *Hub) Saw(channel string, tok Token, pttl time.Duration) {
	h.SawHolder(channel, tok, pttl, "")
}

// SawHolder is Saw for a key whose holder's release publishes holder (non-empty): a
// message with another non-empty payload since Peek (the release of an earlier
// holder, or of a lock on another node) does not make Check report a release.
func (h *Hub) SawHolder(channel string, tok Token, pttl time.Duration, holder string) {
	until := time.Now().Add(NoTTLBound)
	if pttl >= 0 {
		// The reply came after the server read pttl, which PTTL truncates to the
		// millisecond: counting from now plus one, the bound falls after the
		// server's expiry.
		until = time.Now().Add(pttl + time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[channel]; t != nil && t == tok.topic && t.active && h.epoch == tok.epoch {
		t.seen = sighting{ok: true, tok: tok, until: until, holder: holder}
	}
}

// Check tells a Wait whose listener of channel is subscribed what a TryLock saw:
// ok when one found the key held while the channel was subscribed, on the same
// subscription and without a break since; then released reports a message since it
// was sent (the key may be free), and until bounds the holder's time to live. A
// message after Check wakes the listener.
func (h *Hub) Check(channel string) (until time.Time, released, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	if t == nil || !t.active || !t.seen.ok || t.seen.tok.epoch != h.epoch {
		return time.Time{}, false, false
	}
	return t.seen.until, t.released(), true
}

// released reports whether a message that may be the release of t's sighted holder
// arrived since its TryLock was sent: any message when the holder is unknown or more
// messages came than t keeps; else one with an empty payload or the holder's. The
// hub's lock is held.
func (t *topic) released() bool {
	since := t.seq - t.seen.tok.seq
	if since == 0 {
		return false
	}
	if t.seen.holder == "" || since > recentMessages {
		return true
	}
	for s := t.seen.tok.seq + 1; s <= t.seq; s++ {
		if p := t.recent[s%recentMessages]; p == "" || p == t.seen.holder {
			return true
		}
	}
	return false
}

// Close closes the hub's connection for good and waits for its goroutines. The
// Waits in progress are woken; Register fails from now on.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	ps := h.stopLocked()
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	h.wg.Wait()
}
