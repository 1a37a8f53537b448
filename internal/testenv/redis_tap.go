package testenv

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/distlock/distlock/faultproxy"
)

// A RedisTap dials each connection of the go-redis clients that use its Dialer
// through a fault proxy of its own, and tells the pub/sub connections (those that
// send SUBSCRIBE) from the others. A test can then silence a connection without
// closing it, as a NAT or load balancer that dropped it does, while new connections
// work: SilencePubSub blackholes the pub/sub connections open now, SilenceAll every
// connection open now. A connection's proxy closes with the connection, and every
// proxy left closes at the test's cleanup. Make it before the clients, so that its
// cleanup runs after theirs.
type RedisTap struct {
	mu     sync.Mutex
	conns  map[*tappedConn]struct{}
	closed bool
}

// A tappedConn is a client's connection and the proxy it goes through.
type tappedConn struct {
	net.Conn
	proxy  *faultproxy.Proxy
	tap    *RedisTap
	pubsub atomic.Bool
	once   sync.Once
}

// NewRedisTap returns a RedisTap whose proxies close at t's cleanup.
func NewRedisTap(t testing.TB) *RedisTap {
	tp := &RedisTap{conns: make(map[*tappedConn]struct{})}
	t.Cleanup(func() {
		tp.mu.Lock()
		tp.closed = true
		conns := tp.conns
		tp.conns = nil
		tp.mu.Unlock()
		for c := range conns {
			_ = c.proxy.Close()
		}
	})
	return tp
}

// Dialer is a go-redis Options.Dialer that dials addr through a new fault proxy.
func (tp *RedisTap) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		p, err := faultproxy.New(addr, nil)
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, p.Addr())
		if err != nil {
			_ = p.Close()
			return nil, err
		}
		tc := &tappedConn{Conn: c, proxy: p, tap: tp}
		tp.mu.Lock()
		defer tp.mu.Unlock()
		if tp.closed {
			_ = c.Close()
			_ = p.Close()
			return nil, net.ErrClosed
		}
		tp.conns[tc] = struct{}{}
		return tc, nil
	}
}

// subscribe is how a SUBSCRIBE command's name appears in RESP, lower-cased.
var subscribe = []byte("\r\nsubscribe\r\n")

// Write marks the connection as a pub/sub one when it sends SUBSCRIBE.
func (c *tappedConn) Write(b []byte) (int, error) {
	if !c.pubsub.Load() && bytes.Contains(bytes.ToLower(b), subscribe) {
		c.pubsub.Store(true)
	}
	return c.Conn.Write(b)
}

// Close closes the connection and its proxy.
func (c *tappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.tap.mu.Lock()
		delete(c.tap.conns, c)
		c.tap.mu.Unlock()
		_ = c.proxy.Close()
	})
	return err
}

// SilencePubSub blackholes every pub/sub connection open now (see
// faultproxy.Proxy.Blackhole) and returns how many it silenced. Connections dialed
// later are not silenced.
func (tp *RedisTap) SilencePubSub() int { return tp.silence(true) }

// SilenceAll blackholes every connection open now and returns how many it silenced.
func (tp *RedisTap) SilenceAll() int { return tp.silence(false) }

func (tp *RedisTap) silence(pubsubOnly bool) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	n := 0
	for c := range tp.conns {
		if !pubsubOnly || c.pubsub.Load() {
			c.proxy.Blackhole()
			n++
		}
	}
	return n
}
