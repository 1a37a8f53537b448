package etcdlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRenewRacingUnlock: an Unlock of the lease runs between a Renew's read of the
// key and its refresh of the key's etcd lease; it deletes the key, but its
// revocation of the lease fails. The Renew then refreshes a lease that holds
// nothing, and must say ErrNotHeld (the owner check of rule 2), not success.
func TestRenewRacingUnlock(t *testing.T) {
	eps := []string{etcdSrv.Addr()}
	cli := newClient(t, eps, nil)
	// u's revocations fail: the Unlock deletes the key and leaves its lease.
	u := newLocker(t, newClientWith(t, eps, onUnary(methodRevoke, func(context.Context, func() error) error {
		return status.Error(codes.Internal, "test: the revocation failed")
	})), nil)
	var (
		armed     atomic.Bool
		lease     distlock.Lease
		unlockErr = make(chan error, 1)
	)
	// r's refreshes are preceded, once armed, by u's Unlock of the lease.
	r := newLocker(t, newClientWith(t, eps, beforeStream(methodKeepAlive, func() {
		if armed.CompareAndSwap(true, false) {
			unlockErr <- u.Unlock(ctxFor(t, 5*time.Second), lease)
		}
	})), nil)
	key := "renew-race-" + driver.NewToken()
	const ttl = 5 * time.Second
	lease, err := r.TryLock(ctxFor(t, 5*time.Second), key, ttl)
	require.NoError(t, err)
	id, _ := leaseOf(t, cli, r, key)

	armed.Store(true)
	renewed, err := r.Renew(ctxFor(t, 5*time.Second), lease, ttl)
	select {
	case uerr := <-unlockErr:
		require.NoError(t, uerr, "the Unlock between the Renew's read and its refresh")
	default:
		t.Fatal("the Renew sent no refresh")
	}
	left, lerr := cli.TimeToLive(ctxFor(t, 5*time.Second), id)
	require.NoError(t, lerr)
	require.Positive(t, left.TTL, "the Unlock's failed revocation left the lease alive")
	require.ErrorIs(t, err, distlock.ErrNotHeld, "Renew of a lease whose key an Unlock deleted (returned %+v)", renewed)
}
