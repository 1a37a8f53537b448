package zklock_test

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/testenv"
	"github.com/distlock/distlock/zklock"
)

// ZooKeeper request opcodes (the request header's second int32).
const (
	opDelete = 2
	opExists = 3
)

// writeFailer is a dialer whose connections fail the next writes of requests with
// chosen opcodes as a reset TCP connection does: the write returns a *net.OpError
// (ECONNRESET) and the connection is closed. go-zookeeper hands that error, not
// zk.ErrConnectionClosed, to the request that it was writing (the others get
// ErrConnectionClosed), then reconnects, and the session lives on. A request written
// on a connection that the peer has just reset (a partition that began a moment ago)
// meets exactly this.
type writeFailer struct {
	mu   sync.Mutex
	left map[int32]int // opcode → writes still to fail
	hit  int           // writes failed so far
}

func (f *writeFailer) arm(op int32, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left == nil {
		f.left = make(map[int32]int)
	}
	f.left[op] += n
}

func (f *writeFailer) hits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hit
}

// take reports whether a write of a request with opcode op must fail.
func (f *writeFailer) take(op int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left[op] == 0 {
		return false
	}
	f.left[op]--
	f.hit++
	return true
}

func (f *writeFailer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &failConn{Conn: c, f: f}, nil
}

type failConn struct {
	net.Conn
	f      *writeFailer
	writes int // the first is the handshake, which has no opcode
}

func (c *failConn) Write(p []byte) (int, error) {
	c.writes++
	// go-zookeeper writes a request in one Write: length, xid, opcode, body.
	if c.writes > 1 && len(p) >= 12 && c.f.take(int32(binary.BigEndian.Uint32(p[8:12]))) {
		_ = c.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(),
			Err: os.NewSyscallError("write", syscall.ECONNRESET)}
	}
	return c.Conn.Write(p)
}

// TestReapAfterWriteError: a node that the Locker deletes in the background (the
// nodes that Close releases, a lost lease's, an Unlock's whose outcome is unknown) is
// deleted once the connection is back, also when a request of the deletion failed
// with the connection's own write error (a reset connection: what a request meets
// when it is written just as a partition begins). The session survives throughout,
// so nothing else deletes the node; the reaper used to treat the write error as final
// and leave the key locked for the rest of the session.
func TestReapAfterWriteError(t *testing.T) {
	// Long enough that the session survives go-zookeeper's reconnections (a second's
	// pause each before it dials its only server again) and outlives the test's wait.
	const st = 10 * time.Second
	cases := []struct {
		name string
		// act arms f and ends the lease so that the Locker deletes its node in the
		// background; it returns how many armed writes must have failed.
		act func(t *testing.T, l *zklock.Locker, f *writeFailer, lease distlock.Lease) int
	}{
		{"Close", func(t *testing.T, l *zklock.Locker, f *writeFailer, _ distlock.Lease) int {
			// The reaper of a lease that TryLock returned reads the node's owner
			// first (Exists), then deletes it.
			f.arm(opExists, 1)
			require.NoError(t, l.Close())
			return 1
		}},
		{"Lost", func(t *testing.T, l *zklock.Locker, f *writeFailer, lease distlock.Lease) int {
			f.arm(opExists, 1)
			lost := l.Lost(lease)
			select {
			case <-lost:
			case <-time.After(5 * time.Second):
				t.Fatal("the lease was not reported lost after its Expires")
			}
			return 1
		}},
		{"Unlock", func(t *testing.T, l *zklock.Locker, f *writeFailer, lease distlock.Lease) int {
			// The Unlock's delete fails (outcome unknown), then the reaper's.
			f.arm(opDelete, 2)
			err := l.Unlock(context.Background(), lease)
			require.ErrorIs(t, err, zk.ErrConnectionClosed, "an Unlock whose outcome is unknown")
			t.Logf("Unlock: %v", err)
			return 2
		}},
	}
	obs := newClient(t, standaloneAddrs(), sessionTimeout, nil, false).conn
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &writeFailer{}
			opts := *quiet
			opts.Dialer = f.dial
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sess, err := zklock.Connect(ctx, standaloneAddrs(), st, &opts)
			require.NoError(t, err)
			l, err := zklock.New(sess, &zklock.Options{TickTime: testenv.ZooKeeperTickTime})
			require.NoError(t, err)
			t.Cleanup(func() {
				sess.Close()
				_ = l.Close()
			})
			key := uniqueKey(t)
			lease, err := l.TryLock(ctxT(t), key, 500*time.Millisecond)
			require.NoError(t, err)
			sid := sess.Conn().SessionID()
			want := tc.act(t, l, f, lease)
			require.Eventually(t, func() bool { return f.hits() == want }, 5*time.Second, 5*time.Millisecond,
				"the armed writes did not all fail (%d of %d)", f.hits(), want)
			require.Eventually(t, func() bool { return len(children(t, obs, keyPath(key))) == 0 }, 5*time.Second, 10*time.Millisecond,
				"the lock node is left behind with its session alive")
			require.Equal(t, sid, sess.Conn().SessionID(), "the test needs the session to survive")
		})
	}
}
