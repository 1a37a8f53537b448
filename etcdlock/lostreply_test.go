package etcdlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// replyLoser loses, while armed, the replies of a client's writes that lock,
// renew or unlock: Txn requests and lease keepalives reach the server and take
// effect, and the caller gets an Unavailable error, as when the reply is lost on
// the way back. With once set, it disarms itself after losing one reply.
type replyLoser struct {
	armed atomic.Bool
	once  atomic.Bool
	lost  atomic.Int64 // replies lost
}

// lose reports whether to lose the reply now, and counts it.
func (r *replyLoser) lose() bool {
	if !r.armed.Load() {
		return false
	}
	if r.once.Load() && !r.armed.CompareAndSwap(true, false) {
		return false
	}
	r.lost.Add(1)
	return true
}

var errReplyLost = status.Error(codes.Unavailable, "test: the reply was lost")

func (r *replyLoser) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil && method == methodTxn && r.lose() {
				return errReplyLost
			}
			return err
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || method != methodKeepAlive {
				return s, err
			}
			return &losingStream{ClientStream: s, r: r}, nil
		}),
	}
}

type losingStream struct {
	grpc.ClientStream
	r *replyLoser
}

func (s *losingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m) // the server answered: the keepalive took effect
	if err == nil && s.r.lose() {
		return errReplyLost
	}
	return err
}

// newClientWith is newClient with extra dial options.
func newClientWith(tb testing.TB, endpoints []string, dopts ...grpc.DialOption) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 2 * time.Second,
		DialOptions: dopts,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		tb.Fatalf("clientv3.New(%v): %v", endpoints, err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// TestShorteningRenewLostReply (issue 12, part 5): C holds with a ttl of 10s and
// Renews with 3s, and the reply of the renewal's write is lost, so C keeps its old
// Expires. Renew never shortens what the server holds, so no other client acquires
// the key before that Expires.
func TestShorteningRenewLostReply(t *testing.T) {
	var loser replyLoser
	c := newLocker(t, newClientWith(t, []string{etcdSrv.Addr()}, loser.dialOptions()...), &etcdlock.Options{Owner: "c"})
	d := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), &etcdlock.Options{Owner: "d"})
	key := "shorten-" + driver.NewToken()
	const long, short = 10 * time.Second, 3 * time.Second
	lc, err := c.TryLock(ctxFor(t, 5*time.Second), key, long)
	require.NoError(t, err)
	loser.armed.Store(true)
	renewed, err := c.Renew(ctxFor(t, 5*time.Second), lc, short)
	loser.armed.Store(false)
	if loser.lost.Load() == 0 {
		t.Fatalf("Renew(%v) wrote nothing whose reply could be lost (err %v)", short, err)
	}
	if err == nil || errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Renew whose reply was lost: %v, %+v; want a transport error", err, renewed)
	}
	t.Logf("Renew(%v) with its reply lost: %v", short, err)
	// C's bound is still its old Expires: until then, D must find the key held.
	for n := 0; time.Until(lc.Expires) > 0; n++ {
		ld, err := d.TryLock(ctxFor(t, 5*time.Second), key, time.Second)
		if err == nil {
			t.Fatalf("D acquired the key (fence %d) %v before C's Expires, %v after C's lost Renew(%v)",
				ld.Fence, time.Until(lc.Expires), time.Since(lc.Expires.Add(-long)), short)
		}
		if !errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("D's TryLock: %v", err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-t.Context().Done():
			return
		}
	}
	if err := c.Unlock(ctxFor(t, 5*time.Second), lc); err != nil {
		t.Fatalf("C's Unlock after its Expires (the server still holds the key for C): %v", err)
	}
}

// TestRepeatAfterLostReply: each call repeats a write whose reply was lost (the
// write took effect), and the repetition finds what the first attempt did: a
// TryLock its own key, a Renew the key on its new lease; an Unlock finds the key
// gone and says ErrNotHeld.
func TestRepeatAfterLostReply(t *testing.T) {
	var loser replyLoser
	loser.once.Store(true)
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	c := newLocker(t, newClientWith(t, []string{etcdSrv.Addr()}, loser.dialOptions()...), &etcdlock.Options{Owner: "c"})
	key := "repeat-" + driver.NewToken()

	loser.armed.Store(true)
	lc, err := c.TryLock(ctxFor(t, 10*time.Second), key, 3*time.Second)
	if err != nil {
		t.Fatalf("TryLock whose first reply was lost: %v", err)
	}
	if loser.lost.Load() != 1 {
		t.Fatalf("%d replies lost, want 1", loser.lost.Load())
	}
	get, err := cli.Get(ctxFor(t, 5*time.Second), c.EtcdKey(key))
	if err != nil || len(get.Kvs) != 1 || uint64(get.Kvs[0].CreateRevision) != lc.Fence {
		t.Fatalf("the key after TryLock: %v, %v; want create revision %d", get, err, lc.Fence)
	}

	first, _ := leaseOf(t, cli, c, key)
	loser.armed.Store(true)
	lc, err = c.Renew(ctxFor(t, 10*time.Second), lc, 20*time.Second)
	if err != nil {
		t.Fatalf("Renew (a move to a longer lease) whose first reply was lost: %v", err)
	}
	id, granted := leaseOf(t, cli, c, key)
	if id == first || granted != 20 {
		t.Fatalf("after the Renew the key is on lease %x of %ds; want a new lease of 20s", id, granted)
	}

	loser.armed.Store(true)
	err = c.Unlock(ctxFor(t, 10*time.Second), lc)
	if !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Unlock whose first reply was lost: %v; want ErrNotHeld (the repetition finds the key gone)", err)
	}
	if get, err := cli.Get(ctxFor(t, 5*time.Second), c.EtcdKey(key)); err != nil || len(get.Kvs) != 0 {
		t.Fatalf("the key after the Unlock: %v, %v; want it gone", get, err)
	}
}
