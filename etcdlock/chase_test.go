package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// afterLessorCheck returns just after etcd's leader ran its periodic check of
// expired leases (every 500ms), so that a lease granted now expires just after a
// check, and the server alone would revoke it almost 500ms after its expiry.
func afterLessorCheck(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	g, err := cli.Grant(ctx, 1)
	require.NoError(t, err)
	k := fmt.Sprintf("chase-tick/%s/%d", t.Name(), g.ID)
	wch := cli.Watch(ctx, k, clientv3.WithFilterPut())
	_, err = cli.Put(ctx, k, "", clientv3.WithLease(g.ID))
	require.NoError(t, err)
	for resp := range wch {
		require.NoError(t, resp.Err())
		if len(resp.Events) > 0 {
			return
		}
	}
	t.Fatal("the watch of the tick key ended")
}

// TestChaseFreesExpiredLease: a holder's lease that is not refreshed (its client
// vanished) is freed for a waiting Lock by the waiter's chase (its revocation of
// the lease), never before the holder's Expires, with a fence above the holder's.
// Each trial's lease expires just after the leader's 500ms expiry check, so the
// chase, which frees the key about 0.1s after the expiry, wins the race against
// the server's own revocation by far: this test fails without the chase (no
// revocation). How soon the key is freed is a timing, measured by the matrix's
// W3; the trials only log it, since on a loaded machine (-race, every suite at
// once) one of them took over 300ms. A waiter whose chase lost a trial to the
// server still acquires: each trial's deadline covers the server's check.
func TestChaseFreesExpiredLease(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	const margin = 2 * time.Second // the server's check frees the key 0.5s after its expiry at most
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	w := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	for trial := range 3 {
		h := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
		key := fmt.Sprintf("chase-expired-%d", trial)
		afterLessorCheck(t, cli)
		held, err := h.TryLock(ctxFor(t, 5*time.Second), key, ttl)
		require.NoError(t, err)
		// The holder never renews: its keepalives stopped.
		_, revokedBefore := w.ChaseCounts()
		ctx, cancel := context.WithDeadline(t.Context(), held.Expires.Add(margin))
		got, err := distlock.Lock(ctx, w, key, ttl, nil)
		at := time.Now()
		cancel()
		require.NoError(t, err, "trial %d: the waiter did not acquire within %v after the holder's Expires", trial, margin)
		require.Greater(t, got.Fence, held.Fence)
		require.False(t, at.Before(held.Expires), "trial %d: acquired before the holder's Expires", trial)
		_, revoked := w.ChaseCounts()
		t.Logf("trial %d: acquired %v after the holder's Expires; the chase revoked %d leases", trial, at.Sub(held.Expires), revoked-revokedBefore)
		require.NoError(t, w.Unlock(ctxFor(t, 5*time.Second), got))
	}
	probes, revokes := w.ChaseCounts()
	t.Logf("probes %d, revokes %d", probes, revokes)
	require.Positive(t, revokes, "no trial's key was freed by the chase")
}

// TestChaseSparesLiveHolder: a holder that keeps renewing, late in each ttl so
// that the leader's TTL drops below a second between renewals, is never revoked
// by the chases of waiters that wait for several ttls: no waiter acquires, every
// Renew succeeds, and the holder's fence stays the key's.
func TestChaseSparesLiveHolder(t *testing.T) {
	t.Parallel()
	for _, ttl := range []time.Duration{2 * time.Second, 3 * time.Second} {
		t.Run(ttl.String(), func(t *testing.T) {
			t.Parallel()
			h := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
			key := "chase-live-" + ttl.String()
			lease, err := h.TryLock(ctxFor(t, 5*time.Second), key, ttl)
			require.NoError(t, err)
			waitFor := 4 * ttl
			deadline := time.Now().Add(waitFor)

			var wg sync.WaitGroup
			waiters := []*etcdLockerT{}
			for range 2 {
				waiters = append(waiters, &etcdLockerT{l: newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)})
			}
			for _, w := range waiters {
				wg.Go(func() {
					ctx, cancel := context.WithDeadline(t.Context(), deadline)
					defer cancel()
					got, err := distlock.Lock(ctx, w.l, key, ttl, nil)
					if err == nil {
						w.err = fmt.Errorf("a waiter acquired %q (fence %d) while its holder renewed", key, got.Fence)
						_ = w.l.Unlock(context.Background(), got)
						return
					}
					if !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
						w.err = fmt.Errorf("Lock: %w", err)
					}
				})
			}
			// Renew when three quarters of the ttl have passed: the leader's TTL is
			// below a second for the last part of each period.
			renewals := 0
			for time.Now().Before(deadline) {
				timer := time.NewTimer(time.Until(lease.Expires.Add(-ttl / 4)))
				<-timer.C
				next, err := h.Renew(ctxFor(t, ttl/4), lease, ttl)
				require.NoError(t, err, "renewal %d", renewals)
				require.Equal(t, lease.Fence, next.Fence)
				lease = next
				renewals++
			}
			wg.Wait()
			for _, w := range waiters {
				require.NoError(t, w.err)
			}
			holder, err := h.Inspect(ctxFor(t, 5*time.Second), key)
			require.NoError(t, err)
			require.Equal(t, lease.Fence, holder.Fence)
			_, err = h.Renew(ctxFor(t, 5*time.Second), lease, ttl)
			require.NoError(t, err)
			var probes, revokes int64
			for _, w := range waiters {
				p, r := w.l.ChaseCounts()
				probes, revokes = probes+p, revokes+r
			}
			t.Logf("%d renewals; waiters' probes %d, revokes %d", renewals, probes, revokes)
			require.Positive(t, probes, "the waiters never probed the holder's lease")
			require.Zero(t, revokes)
			require.NoError(t, h.Unlock(ctxFor(t, 5*time.Second), lease))
		})
	}
}

type etcdLockerT struct {
	l   *etcdlock.Locker
	err error
}
