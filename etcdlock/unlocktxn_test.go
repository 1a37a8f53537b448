package etcdlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// TestUnlockComparesOnce: Unlock of an acquisition the Locker made compares only
// the key's mod revision (one read on the server), also after a Renew moved the
// key to a longer lease, and a move by another Locker makes it fall back to the
// owner check by token without taking the moved-from lease as a spare.
func TestUnlockComparesOnce(t *testing.T) {
	var mu sync.Mutex
	var deletes [][]*pb.Compare // the comparisons of each delete transaction
	inspect := grpc.WithChainUnaryInterceptor(func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && m == methodTxn && len(txn.Success) > 0 && txn.Success[0].GetRequestDeleteRange() != nil {
			mu.Lock()
			deletes = append(deletes, txn.Compare)
			mu.Unlock()
		}
		return invoker(ctx, m, req, reply, cc, opts...)
	})
	cli := newClientWith(t, []string{etcdSrv.Addr()}, inspect)
	l := newLocker(t, cli, nil)
	other := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	ctx := ctxFor(t, 10*time.Second)
	last := func() []*pb.Compare {
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, deletes)
		return deletes[len(deletes)-1]
	}
	modOnly := func(cmps []*pb.Compare) {
		require.Len(t, cmps, 1)
		require.Equal(t, pb.Compare_MOD, cmps[0].Target)
	}

	lease, err := l.TryLock(ctx, "cmp-once-"+driver.NewToken(), 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx, lease))
	modOnly(last())

	lease, err = l.TryLock(ctx, "cmp-move-"+driver.NewToken(), 2*time.Second)
	require.NoError(t, err)
	lease, err = l.Renew(ctx, lease, 5*time.Second) // moves the key to a lease of 5s
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx, lease))
	modOnly(last())
	_, err = l.Inspect(ctx, lease.Key)
	require.ErrorIs(t, err, distlock.ErrNotHeld)

	// Another Locker moves the key: the mod revision changed, and Unlock still
	// releases it (by token).
	lease, err = l.TryLock(ctx, "cmp-other-"+driver.NewToken(), 2*time.Second)
	require.NoError(t, err)
	moved, err := other.Renew(ctx, lease, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx, moved))
	_, err = l.Inspect(ctx, lease.Key)
	require.ErrorIs(t, err, distlock.ErrNotHeld)
	// The next acquisitions work on whatever lease the pool gives them.
	for range 3 {
		next, err := l.TryLock(ctx, lease.Key, 2*time.Second)
		require.NoError(t, err)
		require.Greater(t, next.Fence, lease.Fence)
		require.NoError(t, l.Unlock(ctx, next))
	}
}
