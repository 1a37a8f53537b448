package sqltest

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/sqllock"
	"github.com/stretchr/testify/require"
)

// testRenewNeverShortens: a Renew with a ttl shorter than what the lease has left
// succeeds and returns Expires = start + the short ttl, but leaves the row's expiry
// where it was; a longer ttl moves it later.
func (e Env) testRenewNeverShortens(t *testing.T) {
	a := e.New(t, &sqllock.Options{Table: "renewshort"})
	b := e.New(t, &sqllock.Options{Table: "renewshort"})
	key := Key("renewshort")
	lease, err := a.TryLock(OpCtx(t), key, time.Minute)
	require.NoError(t, err)
	before := time.Now()
	short, err := a.Renew(OpCtx(t), lease, 100*time.Millisecond)
	after := time.Now()
	require.NoError(t, err, "shorter Renew")
	require.False(t, short.Expires.Before(before.Add(100*time.Millisecond)) || short.Expires.After(after.Add(100*time.Millisecond)),
		"shorter Renew: Expires %v after the call began (it took %v), want its start + 100ms", short.Expires.Sub(before), after.Sub(before))
	h, err := b.Inspect(OpCtx(t), key)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Until(h.Expires), 50*time.Second, "after a Renew of 100ms on a 1m lease: the Renew shortened the row's expiry")
	_, err = a.Renew(OpCtx(t), short, 2*time.Minute)
	require.NoError(t, err, "longer Renew")
	h, err = b.Inspect(OpCtx(t), key)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Until(h.Expires), 110*time.Second, "after a Renew of 2m")
}

// RenewShorterLostReply tests that the holder of a long lease that renews with a
// short ttl, and whose Renew fails because its reply is lost (its statement
// reaches the database after the caller's deadline), keeps the key for its old
// Expires: no other client acquires it in the short ttl plus a grace after the
// statement arrived. newClient returns a Locker and the proxy between it and the
// database; updates returns a function whose result changes when an UPDATE of
// key's row has run, even one that changes no value.
func RenewShorterLostReply(t *testing.T, newClient func(t *testing.T, opts *sqllock.Options) (Locker, *faultproxy.Proxy), updates func(t *testing.T, key string) func() int64) {
	const (
		delay = 400 * time.Millisecond // one way, on the holder's proxy
		short = 300 * time.Millisecond
		grace = 700 * time.Millisecond
	)
	a, p := newClient(t, &sqllock.Options{Table: "renewlost"})
	b, _ := newClient(t, &sqllock.Options{Table: "renewlost"})
	key := Key("renewlost")
	lease, err := a.TryLock(OpCtx(t), key, 30*time.Second)
	require.NoError(t, err)
	// Warm up: the connection has the renewing statement prepared, so that the
	// delayed bytes are the whole statement.
	lease, err = a.Renew(OpCtx(t), lease, 30*time.Second)
	require.NoError(t, err)
	ran := updates(t, key)
	before := ran()
	p.Delay(delay)
	defer p.Heal()
	ctx, cancel := context.WithTimeout(t.Context(), delay/2)
	_, err = a.Renew(ctx, lease, short)
	cancel()
	require.Error(t, err, "Renew whose reply is lost")
	require.NotErrorIs(t, err, distlock.ErrNotHeld, "Renew whose reply is lost: want a transport error")
	// The Renew's statement runs when the proxy delivers it.
	for deadline := time.Now().Add(10 * time.Second); ran() == before; {
		require.True(t, time.Now().Before(deadline), "the Renew's statement did not run within 10s")
		time.Sleep(20 * time.Millisecond) // polling the database, bounded by the deadline
	}
	arrived := time.Now()
	for end := arrived.Add(short + grace); time.Now().Before(end); {
		lb, err := b.TryLock(OpCtx(t), key, time.Minute)
		if err == nil {
			_ = b.Unlock(OpCtx(t), lb)
			t.Fatalf("another client acquired the key %v after the shorter Renew's statement arrived, while the holder's Expires was still %v ahead",
				time.Since(arrived).Round(time.Millisecond), time.Until(lease.Expires).Round(time.Millisecond))
		}
		require.ErrorIs(t, err, distlock.ErrLocked, "TryLock of the held key")
		time.Sleep(25 * time.Millisecond) // pacing the attempts, bounded by end
	}
	p.Heal()
	require.NoError(t, a.Unlock(OpCtx(t), lease), "Unlock with the old lease after the lost Renew")
}
