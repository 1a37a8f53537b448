package zklock_test

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// TestConnectGrantedTimeout: Connect reports the session timeout that the server
// granted, not the one asked for (testenv's servers clamp to [400ms, 30s]), and the
// Locker counts leases with the granted one: a session that asked for 60s and got
// 30s gives leases of at most 2/3 × 30s - TickTime/2.
func TestConnectGrantedTimeout(t *testing.T) {
	for _, tc := range []struct{ asked, granted time.Duration }{
		{60 * time.Second, testenv.ZooKeeperMaxSessionTimeout},
		{100 * time.Millisecond, testenv.ZooKeeperMinSessionTimeout},
		{2 * time.Second, 2 * time.Second},
	} {
		sess := connectSession(t, standaloneAddrs(), tc.asked)
		require.Equal(t, tc.granted, sess.Timeout(), "asked for %v", tc.asked)
		sess.Close()
	}
	a := newClient(t, standaloneAddrs(), time.Minute, nil, false)
	start := time.Now()
	lease, err := a.l.TryLock(ctxT(t), uniqueKey(t), time.Hour)
	returned := time.Now()
	require.NoError(t, err)
	bound := 2*testenv.ZooKeeperMaxSessionTimeout/3 - testenv.ZooKeeperTickTime/2
	require.WithinRange(t, lease.Expires, start.Add(bound), returned.Add(bound),
		"Expires %v after the start; want the bound of the granted 30s session, %v", lease.Expires.Sub(start), bound)
	require.NoError(t, a.l.Unlock(ctxT(t), lease))
}

func TestConnectErrors(t *testing.T) {
	ctx := ctxT(t)
	for _, tc := range []struct {
		name    string
		servers []string
		st      time.Duration
		opts    *zklock.ConnectOptions
		want    string
	}{
		{"no servers", nil, time.Second, nil, "no servers"},
		{"zero timeout", standaloneAddrs(), 0, nil, "session timeout 0s"},
		{"negative timeout", standaloneAddrs(), -time.Second, nil, "session timeout -1s"},
		{"a dialer that hides the grant", standaloneAddrs(), time.Second,
			&zklock.ConnectOptions{ZK: []func(*zk.Conn){zk.WithLogger(discard{}), zk.WithDialer(net.DialTimeout)}}, "ConnectOptions.Dialer"},
	} {
		s, err := zklock.Connect(ctx, tc.servers, tc.st, tc.opts)
		require.Nil(t, s, tc.name)
		require.ErrorIs(t, err, distlock.ErrInvalid, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
		var oe *distlock.OpError
		require.ErrorAs(t, err, &oe, tc.name)
		require.Equal(t, "Connect", oe.Op, tc.name)
	}

	// A server that cannot be reached: Connect returns when ctx ends.
	p, err := faultproxy.New(zkSrv.Addr(), nil)
	require.NoError(t, err)
	defer p.Close()
	p.Cut()
	cctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, err := zklock.Connect(cctx, []string{p.Addr()}, time.Second, quiet)
	require.Nil(t, s)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second, "Connect returns promptly when ctx ends")
}

// TestConnectDialer: ConnectOptions.Dialer dials every connection, reconnections
// too, and Connect still learns the grant through it.
func TestConnectDialer(t *testing.T) {
	var dials atomic.Int64
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		dials.Add(1)
		return net.DialTimeout(network, addr, timeout)
	}
	p, err := faultproxy.New(zkSrv.Addr(), nil)
	require.NoError(t, err)
	defer p.Close()
	o := *quiet
	o.Dialer = dial
	sess, err := zklock.Connect(ctxT(t), []string{p.Addr()}, 3*time.Second, &o)
	require.NoError(t, err)
	defer sess.Close()
	require.Equal(t, 3*time.Second, sess.Timeout())
	sid := sess.Conn().SessionID()
	p.Cut()
	requireState(t, sess.Conn(), zk.StateConnecting, 5*time.Second)
	p.Heal()
	requireState(t, sess.Conn(), zk.StateHasSession, 10*time.Second)
	require.Equal(t, sid, sess.Conn().SessionID(), "the session survives a short cut")
	require.GreaterOrEqual(t, dials.Load(), int64(2), "the reconnection used the Dialer")
	require.Equal(t, 3*time.Second, sess.Timeout(), "the reconnection's grant")
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// TestRenegotiatedTimeout: a reconnection that is granted a shorter session timeout
// (a server with other settings) shortens later leases to the smallest grant (with
// the ping interval of the largest), and closes Lost for the leases whose Expires was
// counted with the longer one, whether they were watched before or after.
func TestRenegotiatedTimeout(t *testing.T) {
	a := newClient(t, standaloneAddrs(), 2*time.Second, nil, false)
	watched, err := a.l.TryLock(ctxT(t), uniqueKey(t), time.Hour)
	require.NoError(t, err)
	later, err := a.l.TryLock(ctxT(t), uniqueKey(t), time.Hour)
	require.NoError(t, err)
	lost := a.l.Lost(watched)
	a.sess.RecordGrant(time.Second)
	select {
	case <-lost:
	case <-time.After(time.Until(watched.Expires) - 300*time.Millisecond):
		t.Fatalf("Lost still open %v before the Expires that the longer session timeout gave", time.Until(watched.Expires))
	}
	select {
	case <-a.l.Lost(later):
	case <-time.After(time.Until(later.Expires) - 300*time.Millisecond):
		t.Fatal("Lost of a lease counted with the longer timeout, watched after the shorter grant, still open")
	}
	start := time.Now()
	lease, err := a.l.TryLock(ctxT(t), uniqueKey(t), time.Hour)
	returned := time.Now()
	require.NoError(t, err)
	bound := time.Second - 2*time.Second/3 - testenv.ZooKeeperTickTime/2
	require.WithinRange(t, lease.Expires, start.Add(bound), returned.Add(bound),
		"Expires %v after the start; want %v (1s granted last, pings every 2s/3)", lease.Expires.Sub(start), bound)
	select {
	case <-a.l.Lost(lease):
		t.Fatal("Lost closed for a lease counted with the shorter timeout")
	default:
	}
	require.NoError(t, a.l.Unlock(ctxT(t), lease))
}

// connLoops counts the goroutines that run go-zookeeper's connection loop, one per
// *zk.Conn that has not ended.
func connLoops() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "go-zookeeper/zk.(*Conn).loop(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestSessionCloseEndsItsGoroutines: Session.Close returns once go-zookeeper's
// connection loop of its Conn has ended, also when the server's answer to the
// session's close never comes (a stalled link): go-zookeeper's own Close returns
// after a second, while its loop waits for a read deadline of 2/3 of the session
// timeout.
func TestSessionCloseEndsItsGoroutines(t *testing.T) {
	p, err := faultproxy.New(zkSrv.Addr(), nil)
	require.NoError(t, err)
	defer p.Close()
	before := connLoops()
	sess, err := zklock.Connect(ctxT(t), []string{p.Addr()}, 6*time.Second, quiet)
	require.NoError(t, err)
	p.Stall()
	start := time.Now()
	sess.Close()
	took := time.Since(start)
	require.LessOrEqual(t, connLoops(), before, "go-zookeeper's connection loop outlived Session.Close (which took %v)", took)
	require.Less(t, took, 5*time.Second, "Session.Close")
}
