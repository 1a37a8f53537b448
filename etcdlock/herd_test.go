package etcdlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// countTryLocks returns a dial option that counts the TryLock transactions (a Txn
// whose success branch puts) that a client sends.
func countTryLocks(n *atomic.Int64) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && m == methodTxn && len(txn.Success) > 0 && txn.Success[0].GetRequestPut() != nil {
			n.Add(1)
		}
		return invoker(ctx, m, req, reply, cc, opts...)
	})
}

// TestNoHerd: 1,000 distlock.Lock calls on one key, spread over 4 Lockers, each
// releasing the key as soon as it has it. A release wakes one Wait per Locker, not
// every waiter: the TryLocks per release stay near the number of Lockers.
func TestNoHerd(t *testing.T) {
	const (
		lockers = 4
		callers = 1000
		ttl     = time.Minute // no Wait's timer for the holder's ttl fires
		maxPer  = 12          // TryLocks per release
	)
	eps := []string{etcdSrv.Addr()}
	var tries atomic.Int64
	ls := make([]*etcdlock.Locker, lockers)
	for i := range ls {
		ls[i] = newLocker(t, newClientWith(t, eps, countTryLocks(&tries)), nil)
	}
	holder := newLocker(t, newClient(t, eps, nil), nil)
	key := "herd-" + driver.NewToken()
	first, err := holder.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)

	ctx := ctxFor(t, 3*time.Minute)
	opts := &distlock.LockOptions{MaxWait: time.Minute}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		l := ls[i%lockers]
		wg.Go(func() {
			lease, err := distlock.Lock(ctx, l, key, ttl, opts)
			if err == nil {
				err = l.Unlock(ctx, lease)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	waiting := func() int {
		n := 0
		for _, l := range ls {
			n += l.Waiting(key)
		}
		return n
	}
	require.Eventually(t, func() bool { return waiting() == callers }, time.Minute, 10*time.Millisecond,
		"the callers did not all wait")
	before, start := tries.Load(), time.Now()
	require.NoError(t, holder.Unlock(ctxFor(t, 5*time.Second), first))
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	per := float64(tries.Load()-before) / callers
	t.Logf("%d releases in %v: %.2f TryLocks per release, %v per handoff", callers, time.Since(start), per, time.Since(start)/callers)
	require.LessOrEqual(t, per, float64(maxPer), "TryLocks per release")
}
