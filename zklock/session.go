package zklock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// A Session is a ZooKeeper connection (a *zk.Conn and its session) that knows the
// session timeout the servers granted it. Connect makes one; New takes one, so that a
// Locker never counts on a session timeout longer than the granted one. It is safe for
// concurrent use, and several Lockers may share it (they share its session).
//
// A server clamps the timeout that a client asks for to its [minSessionTimeout,
// maxSessionTimeout] (by default 2 and 20 ticks), and answers every handshake with
// the timeout it granted. go-zookeeper keeps that value to itself (it only logs it),
// so the Session reads it from the handshake answer on the wire: Connect gives
// go-zookeeper a dialer whose connections note the first frame each server sends,
// the ConnectResponse of ZooKeeper's protocol (length, protocol version, timeout,
// session id, ...).
//
// Every reconnection is a new handshake, and may grant another timeout: go-zookeeper
// asks for the last granted one again, which a server with the same settings grants
// unchanged, but a server with other minSessionTimeout or maxSessionTimeout settings
// grants another value, and that one then governs the session. The Session records
// every grant; Lockers count their leases with the smallest timeout it was ever granted
// and the longest ping interval, and report their watched leases lost (see
// Locker.Lost) when a reconnection grants less than before. Give every server of an
// ensemble the same session timeout settings.
type Session struct {
	conn      *zk.Conn
	ended     chan struct{} // closed by Close, or once the connection is closed otherwise
	endedOnce sync.Once
	loopDone  chan struct{} // closed once go-zookeeper's connection loop has ended

	mu      sync.Mutex
	granted time.Duration // at the latest handshake
	least   time.Duration // the smallest grant so far
	most    time.Duration // the largest grant so far
	link    net.Conn      // the network connection dialed last
	shut    bool          // the Session is closing: dial nothing more
}

// ConnectOptions configure Connect. A nil *ConnectOptions means all defaults.
type ConnectOptions struct {
	// Dialer dials each server; nil means net.DialTimeout. Connect wraps it to read
	// the handshake answers.
	Dialer zk.Dialer
	// ZK are further go-zookeeper options for zk.Connect, such as zk.WithLogger,
	// zk.WithLogInfo, zk.WithEventCallback or zk.WithHostProvider. Do not pass
	// zk.WithDialer here (set Dialer): a dialer that replaces Connect's hides the
	// granted timeout, and Connect fails with an error wrapping distlock.ErrInvalid.
	ZK []func(*zk.Conn)
}

// Connect connects to the ZooKeeper servers (host:port each) asking for a session
// timeout of sessionTimeout, and returns once the client has its session, with the
// timeout that the server granted (Session.Timeout), or when ctx ends: then it closes
// the connection and returns ctx's error. Errors are *distlock.OpError with Op
// "Connect"; a sessionTimeout that is not positive, or no servers, wraps
// distlock.ErrInvalid.
//
// The Session's connection reconnects by itself, as any *zk.Conn does; close it with
// Session.Close when no Locker uses it any more.
func Connect(ctx context.Context, servers []string, sessionTimeout time.Duration, opts *ConnectOptions) (*Session, error) {
	fail := func(err error) (*Session, error) {
		return nil, &distlock.OpError{Backend: backend, Op: "Connect", Err: err}
	}
	if len(servers) == 0 {
		return fail(fmt.Errorf("%w: no servers", distlock.ErrInvalid))
	}
	if sessionTimeout <= 0 {
		return fail(fmt.Errorf("%w: session timeout %v is not positive", distlock.ErrInvalid, sessionTimeout))
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	var o ConnectOptions
	if opts != nil {
		o = *opts
	}
	dial := o.Dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	s := &Session{}
	// Connect's dialer first: a later zk.WithDialer would replace it, which the
	// check below reports.
	conn, events, err := zk.Connect(servers, sessionTimeout, connOptions(zk.WithDialer(s.dialer(dial)), o.ZK)...)
	if err != nil {
		return fail(err)
	}
	for waiting := true; waiting; {
		select {
		case ev, ok := <-events:
			if !ok {
				return fail(errors.New("the connection closed before it had a session"))
			}
			waiting = ev.Type != zk.EventSession || ev.State != zk.StateHasSession
		case <-ctx.Done():
			s.closeConn(conn, events)
			return fail(fmt.Errorf("no session with %v: %w", servers, ctx.Err()))
		}
	}
	// The handshake answer was read before go-zookeeper announced the session.
	if s.Timeout() <= 0 {
		s.closeConn(conn, events)
		return fail(fmt.Errorf("%w: the granted session timeout was not seen: a zk.WithDialer in ConnectOptions.ZK replaced Connect's dialer (set ConnectOptions.Dialer instead)", distlock.ErrInvalid))
	}
	s.conn = conn
	s.ended = make(chan struct{})
	s.loopDone = make(chan struct{})
	go s.watch(events)
	return s, nil
}

// watch reads the connection's events until go-zookeeper closes their channel,
// which it does once the connection is closed (Session.Close, or a Close of the
// *zk.Conn itself), and then closes s.ended: the session is over, and the Lockers'
// background deletions stop (ZooKeeper deletes a closed session's nodes). The
// events themselves go unused (go-zookeeper drops those that nobody reads; pass
// zk.WithEventCallback in ConnectOptions.ZK to see them).
func (s *Session) watch(events <-chan zk.Event) {
	for range events {
	}
	s.end()
	close(s.loopDone)
}

// closeConn closes conn, and returns once go-zookeeper's connection loop has ended
// (it closes events as it ends; the caller reads nothing more from events). It
// closes the network connection itself once conn.Close returned, and dials no
// other, so that the loop ends at once: go-zookeeper's Close waits at most a second
// for the server's answer to the session's close, and without that answer its
// loop would wait for a read deadline of 2/3 of the session timeout (10 times that
// in a handshake), outliving Close.
func (s *Session) closeConn(conn *zk.Conn, events <-chan zk.Event) {
	conn.Close()
	s.mu.Lock()
	s.shut = true
	link := s.link
	s.mu.Unlock()
	if link != nil {
		_ = link.Close()
	}
	if events != nil {
		for range events {
		}
	}
}

// end closes s.ended, once.
func (s *Session) end() { s.endedOnce.Do(func() { close(s.ended) }) }

// closed reports whether the Session's connection was closed.
func (s *Session) closed() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// connOptions returns first and rest as go-zookeeper's option type (which it does
// not export; O is inferred from first).
func connOptions[O ~func(*zk.Conn)](first O, rest []func(*zk.Conn)) []O {
	all := make([]O, 0, 1+len(rest))
	all = append(all, first)
	for _, f := range rest {
		all = append(all, f)
	}
	return all
}

// Conn returns the Session's connection, for other uses of ZooKeeper.
func (s *Session) Conn() *zk.Conn { return s.conn }

// Timeout returns the session timeout that the server granted at the latest
// handshake (Connect's, or a reconnection's).
func (s *Session) Timeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted
}

// Close closes the connection, which ends the session: ZooKeeper deletes its
// ephemeral nodes, so every lock taken through it is released. Close the Lockers
// that use the Session first, or after. The Lockers' background work (the
// deletions that a Locker's Close, a cancelled TryLock or an Unlock whose outcome
// was unknown left running) ends with it, and stops before the connection closes,
// so that none of its requests meets the close. Close returns once go-zookeeper's
// goroutines of the connection have ended: within seconds (go-zookeeper waits up
// to a second for the server's answer to the session's close), also when the
// server does not answer. So do not call it from a zk.WithEventCallback function, which runs on
// one of those goroutines. Close the Session rather than its Conn: a Conn closed by
// itself is noticed only once go-zookeeper ends its connection loop.
func (s *Session) Close() {
	s.end()
	s.closeConn(s.conn, nil)
	<-s.loopDone
}

// bounds returns the smallest and the largest session timeout granted so far.
func (s *Session) bounds() (least, most time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.least, s.most
}

// record notes a handshake that granted timeout d.
func (s *Session) record(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.granted = d
	if s.least == 0 || d < s.least {
		s.least = d
	}
	s.most = max(s.most, d)
}

// dialer wraps dial so that every connection reports its handshake answer to s.
func (s *Session) dialer(dial zk.Dialer) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := dial(network, address, timeout)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.shut {
			_ = c.Close()
			return nil, net.ErrClosed
		}
		s.link = &handshakeConn{Conn: c, s: s}
		return s.link, nil
	}
}

// The first frame a server sends on a connection is its ConnectResponse: a 4-byte
// length, then protocolVersion (int32), timeOut (int32, milliseconds), sessionId
// (int64) and passwd, big-endian (ZooKeeper's jute encoding).
const handshakeHead = 4 + 4 + 4 + 8

// A handshakeConn passes everything through and reads the granted timeout from the
// first bytes that the server sends. go-zookeeper reads a connection from one
// goroutine at a time (the handshake, then its receive loop).
type handshakeConn struct {
	net.Conn
	s    *Session
	head [handshakeHead]byte
	n    int
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.n < len(c.head) && n > 0 {
		c.n += copy(c.head[c.n:], p[:n])
		if c.n == len(c.head) {
			if d, ok := parseHandshake(c.head[:]); ok {
				c.s.record(d)
			}
		}
	}
	return n, err
}

// parseHandshake returns the timeout of a ConnectResponse's head; ok is false for an
// answer that grants no session (session id 0: the session expired) or is malformed.
func parseHandshake(head []byte) (timeout time.Duration, ok bool) {
	length := int32(binary.BigEndian.Uint32(head[0:4]))
	ms := int32(binary.BigEndian.Uint32(head[8:12]))
	session := int64(binary.BigEndian.Uint64(head[12:20]))
	if length < handshakeHead-4 || ms <= 0 || session == 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
