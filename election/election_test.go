package election_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/memlock"
)

func TestNewInvalid(t *testing.T) {
	l := memlock.New()
	for name, tc := range map[string]struct {
		l    distlock.Locker
		key  string
		opts *election.Options
	}{
		"nil Locker":     {nil, "k", nil},
		"empty key":      {l, "", nil},
		"negative TTL":   {l, "k", &election.Options{TTL: -time.Second}},
		"negative Every": {l, "k", &election.Options{Every: -time.Second}},
		"negative Poll":  {l, "k", &election.Options{Poll: -time.Second}},
		"negative Lock":  {l, "k", &election.Options{Lock: distlock.LockOptions{MaxWait: -1}}},
		"Every >= TTL":   {l, "k", &election.Options{TTL: time.Second, Every: time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := election.New(tc.l, tc.key, tc.opts)
			require.ErrorIs(t, err, distlock.ErrInvalid)
		})
	}
}

// onlyLocker hides every optional interface of its Locker.
type onlyLocker struct{ l distlock.Locker }

func (o onlyLocker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return o.l.TryLock(ctx, key, ttl)
}

func (o onlyLocker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	return o.l.Renew(ctx, lease, ttl)
}

func (o onlyLocker) Unlock(ctx context.Context, lease distlock.Lease) error {
	return o.l.Unlock(ctx, lease)
}

// TestNoInspector: without an Inspector, Leader and Observe say that they cannot
// work; Campaign still does (with backoff instead of a Waiter).
func TestNoInspector(t *testing.T) {
	e, err := election.New(onlyLocker{memlock.New()}, "k", nil)
	require.NoError(t, err)
	_, err = e.Leader(t.Context())
	require.ErrorIs(t, err, errors.ErrUnsupported)
	ch, err := e.Observe(t.Context())
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.Nil(t, ch)
	lead, err := e.Campaign(t.Context())
	require.NoError(t, err)
	require.NoError(t, resign(t, lead))
}

// TestLeadershipLost: when the backend takes the lease away, the leader's Context
// ends at once, with a cause wrapping distlock.ErrNotHeld, and Resign reports the
// loss.
func TestLeadershipLost(t *testing.T) {
	m := memlock.New()
	e, err := election.New(m, "k", &election.Options{TTL: time.Minute})
	require.NoError(t, err)
	lead, err := e.Campaign(t.Context())
	require.NoError(t, err)
	require.NoError(t, lead.Err())
	require.True(t, m.Revoke("k"))
	select {
	case <-lead.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the leader's Context outlived the revocation of its lease by 5s")
	}
	require.ErrorIs(t, context.Cause(lead.Context()), distlock.ErrNotHeld)
	require.ErrorIs(t, lead.Err(), distlock.ErrNotHeld)
	require.ErrorIs(t, resign(t, lead), distlock.ErrNotHeld)
}

// TestLeadershipOutlivesCampaign: the context of Campaign bounds the campaign only;
// the leadership it won is renewed past it, until Resign.
func TestLeadershipOutlivesCampaign(t *testing.T) {
	e, err := election.New(memlock.New(), "k", &election.Options{TTL: 200 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	lead, err := e.Campaign(ctx)
	require.NoError(t, err)
	cancel()
	first := lead.Lease().Expires
	require.Eventually(t, func() bool { return lead.Lease().Expires.After(first.Add(300 * time.Millisecond)) },
		5*time.Second, 10*time.Millisecond, "the lease was not renewed after Campaign's context ended")
	require.NoError(t, lead.Err())
	require.NoError(t, resign(t, lead))
	require.ErrorIs(t, lead.Err(), election.ErrResigned)
}

// gatedWaiter is a memlock client whose first Wait pauses, before it looks at the
// key, until the test opens the gate: as a Wait whose subscription is slow.
type gatedWaiter struct {
	*memlock.Locker
	entered chan struct{} // closed when the first Wait starts
	gate    chan struct{} // the first Wait goes on once it is closed
	once    sync.Once
}

func (g *gatedWaiter) Wait(ctx context.Context, key string) error {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.gate
	}
	return g.Locker.Wait(ctx, key)
}

// TestObserveChangeDuringWait: a leader that takes over between Observe's look at
// the leader and its Wait (which then waits for the new leader's release) is
// reported within about Poll, not when the new leader goes.
func TestObserveChangeDuringWait(t *testing.T) {
	m := memlock.New()
	opts := &election.Options{TTL: 30 * time.Second, Poll: 100 * time.Millisecond}
	g := &gatedWaiter{Locker: m, entered: make(chan struct{}), gate: make(chan struct{})}
	watcher, err := election.New(g, "k", opts)
	require.NoError(t, err)
	a, err := election.New(m, "k", opts)
	require.NoError(t, err)
	b, err := election.New(m, "k", opts)
	require.NoError(t, err)

	ctx, stop := context.WithCancel(t.Context())
	ch, err := watcher.Observe(ctx)
	require.NoError(t, err)
	defer func() {
		stop()
		for range ch {
		}
	}()
	require.True(t, (<-ch).IsZero())
	aLead, err := a.Campaign(ctx)
	require.NoError(t, err)
	require.Equal(t, aLead.Term(), (<-ch).Term)
	<-g.entered
	require.NoError(t, resign(t, aLead))
	bLead, err := b.Campaign(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, resign(t, bLead)) }()
	close(g.gate)
	select {
	case l := <-ch:
		require.Equal(t, bLead.Term(), l.Term)
	case <-time.After(2 * time.Second):
		t.Fatal("Observe did not report the new leader within 2s (Poll is 100ms)")
	}
}
