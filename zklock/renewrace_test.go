package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
)

// TestRenewRacesLoss is issue 28's item 4: a Renew whose check succeeded must not
// return a new Expires when the Locker declares the lease lost (or starts deleting
// its node) before Renew settles its answer; the loss's node removal counts with the
// old Expires, so a later Expires would let another client in while the holder still
// counts on its lease. A hook (SetRenewHook) runs each loss between the server's
// confirmation and Renew's answer, so the interleaving is not left to luck:
//
//   - expired: the old Expires passes and the loss monitor declares the lease lost;
//   - expired and reaped: also the reaper deletes the node and forgets the loss;
//   - expires passed: the old Expires passes, whether or not the monitor saw it;
//   - disconnected: the connection drops, with DisconnectGrace 0;
//   - unlocked: an Unlock whose outcome is unknown, and its background delete.
//
// In every case Renew returns ErrNotHeld, and another client acquires the key, not
// before the old Expires.
func TestRenewRacesLoss(t *testing.T) {
	for _, race := range []string{"expired", "expired and reaped", "expires passed", "disconnected", "unlocked"} {
		t.Run(race, func(t *testing.T) {
			a := newClient(t, standaloneAddrs(), sessionTimeout, nil, true)
			b := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
			key := uniqueKey(t)
			kp := keyPath(key)
			// A short lease: its Expires passes during the hook.
			lease, err := a.l.TryLock(ctxT(t), key, 500*time.Millisecond)
			require.NoError(t, err)
			var lost <-chan struct{}
			if race != "unlocked" {
				lost = a.l.Lost(lease)
			}
			waitLost := func() {
				select {
				case <-lost:
				case <-time.After(5 * time.Second):
					t.Error("the lease was not reported lost")
				}
			}
			waitGone := func() {
				require.Eventually(t, func() bool { return len(children(t, b.conn, kp)) == 0 }, 10*time.Second, 5*time.Millisecond, "the lost lease's node is deleted")
			}
			hooked := false
			a.l.SetRenewHook(func(distlock.Lease) {
				if hooked {
					return
				}
				hooked = true
				switch race {
				case "expired":
					waitLost()
				case "expired and reaped":
					waitLost()
					waitGone()
				case "expires passed":
					time.Sleep(time.Until(lease.Expires)) // a point in time, not an event
				case "disconnected":
					a.cut()
					waitLost()
					a.heal()
				case "unlocked":
					a.cut()
					ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
					err := a.l.Unlock(ctx, lease)
					cancel()
					require.Error(t, err, "Unlock through a cut connection")
					a.heal()
					waitGone()
				}
			})
			renewed, err := a.l.Renew(ctxT(t), lease, time.Minute)
			require.True(t, hooked, "the hook ran")
			if err == nil {
				t.Errorf("Renew returned Expires %v later than the lease's, for a lease that the Locker had let go (%s)", renewed.Expires.Sub(lease.Expires).Round(time.Millisecond), race)
			} else {
				require.ErrorIs(t, err, distlock.ErrNotHeld)
			}
			// The key becomes free, and not before the old Expires; nor before the
			// renewed one, if Renew succeeded.
			lb, acquired := contend(t, b.l, key, 10*time.Second)
			if race != "unlocked" && acquired.Before(lease.Expires) {
				t.Errorf("B acquired %v before the lease's Expires", lease.Expires.Sub(acquired).Round(time.Millisecond))
			}
			if err == nil && acquired.Before(renewed.Expires) {
				t.Errorf("B acquired %v before the Expires that Renew returned: two holders", renewed.Expires.Sub(acquired).Round(time.Millisecond))
			}
			require.NoError(t, b.l.Unlock(ctxT(t), lb))
			_, err = a.l.Renew(ctxT(t), lease, time.Minute)
			require.ErrorIs(t, err, distlock.ErrNotHeld, "a later Renew")
		})
	}
}

// TestLostOfStaleLeaseKeepsRenewedExpires: a lease watched through Lost only after
// it was renewed, with the lease as TryLock returned it (an older Expires), is
// deleted once the lease's latest Expires passes, which the Locker knows from the
// Renew, not at the older one: the holder of the renewed lease counts on that.
func TestLostOfStaleLeaseKeepsRenewedExpires(t *testing.T) {
	a := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	b := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	lease, err := a.l.TryLock(ctxT(t), key, 300*time.Millisecond)
	require.NoError(t, err)
	renewed, err := a.l.Renew(ctxT(t), lease, time.Minute)
	require.NoError(t, err)
	require.True(t, renewed.Expires.After(lease.Expires.Add(300*time.Millisecond)), "the test needs a later Expires")
	lost := a.l.Lost(lease) // the stale copy
	lb, acquired := contend(t, b.l, key, 10*time.Second)
	if acquired.Before(renewed.Expires) {
		t.Errorf("B acquired %v before the Expires that Renew returned (%v after the stale one): two holders",
			renewed.Expires.Sub(acquired).Round(time.Millisecond), acquired.Sub(lease.Expires).Round(time.Millisecond))
	}
	select {
	case <-lost:
	default:
		t.Error("Lost open after the key was taken")
	}
	require.NoError(t, b.l.Unlock(ctxT(t), lb))
}
