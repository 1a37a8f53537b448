package sqllock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// TestRenewNeverShortens: a Renew with a ttl shorter than what the lease has left
// succeeds and returns Expires = start + the short ttl, but leaves the row's expiry
// where it was; a longer ttl moves it later.
func TestRenewNeverShortens(t *testing.T) {
	for _, dc := range dialects(t) {
		t.Run(dc.name, func(t *testing.T) {
			a := dc.new(t, &Options{Table: "renewshort"})
			b := dc.new(t, &Options{Table: "renewshort"}).(distlock.Inspector)
			key := "renewshort-" + distlock.NewToken()
			lease, err := a.TryLock(opCtx(t), key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			short, err := a.Renew(opCtx(t), lease, 100*time.Millisecond)
			after := time.Now()
			if err != nil {
				t.Fatalf("shorter Renew: %v", err)
			}
			if short.Expires.Before(before.Add(100*time.Millisecond)) || short.Expires.After(after.Add(100*time.Millisecond)) {
				t.Fatalf("shorter Renew: Expires %v after the call began (it took %v), want its start + 100ms",
					short.Expires.Sub(before), after.Sub(before))
			}
			h, err := b.Inspect(opCtx(t), key)
			if err != nil {
				t.Fatal(err)
			}
			if rem := time.Until(h.Expires); rem < 50*time.Second {
				t.Fatalf("after a Renew of 100ms on a 1m lease the row expires in %v: the Renew shortened it", rem)
			}
			if _, err := a.Renew(opCtx(t), short, 2*time.Minute); err != nil {
				t.Fatalf("longer Renew: %v", err)
			}
			if h, err = b.Inspect(opCtx(t), key); err != nil {
				t.Fatal(err)
			}
			if rem := time.Until(h.Expires); rem < 110*time.Second {
				t.Fatalf("after a Renew of 2m the row expires in %v", rem)
			}
		})
	}
}

// TestRenewShorterLostReply: the holder of a long lease renews with a short ttl, and
// the Renew fails because its reply is lost (its statement reaches the database
// after the caller's deadline). The holder's bound is still its old Expires, so no
// other client may acquire the key after the statement arrived + the short ttl +
// a grace.
func TestRenewShorterLostReply(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(t *testing.T, opts *Options) distlock.Locker
		// updates returns a function that returns a number that changes when an
		// UPDATE of key's row runs, even one that changes no value.
		updates func(t *testing.T, key string) func() int64
	}{
		{
			name: "postgres",
			new:  func(t *testing.T, o *Options) distlock.Locker { return newPG(t, o) },
			updates: func(t *testing.T, key string) func() int64 {
				pool := pgPool(t, "")
				return func() int64 {
					var xmin int64 // every UPDATE writes a new row version
					err := pool.QueryRow(opCtx(t), `SELECT xmin::text::bigint FROM renewlost WHERE key_hash = $1`, keyHash(key)).Scan(&xmin)
					if err != nil {
						t.Fatal(err)
					}
					return xmin
				}
			},
		},
		{
			name: "mariadb",
			new:  func(t *testing.T, o *Options) distlock.Locker { return newMy(t, o) },
			updates: func(t *testing.T, _ string) func() int64 {
				db := myDB(t, "", nil)
				return func() int64 {
					var name string
					var n int64 // the test's server runs no other UPDATE meanwhile
					if err := db.QueryRowContext(opCtx(t), `SHOW GLOBAL STATUS LIKE 'Com_update'`).Scan(&name, &n); err != nil {
						t.Fatal(err)
					}
					return n
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const (
				delay = 400 * time.Millisecond // one way, on the holder's proxy
				short = 300 * time.Millisecond
				grace = 700 * time.Millisecond
			)
			a := tc.new(t, &Options{Table: "renewlost"})
			b := tc.new(t, &Options{Table: "renewlost"})
			key := "renewlost-" + distlock.NewToken()
			lease, err := a.TryLock(opCtx(t), key, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			// Warm up: the connection has the renewing statement prepared, so that the
			// delayed bytes are the whole statement.
			if lease, err = a.Renew(opCtx(t), lease, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			p := clientOf(t, a).proxy
			updates := tc.updates(t, key)
			ran := updates()
			p.Delay(delay)
			defer p.Heal()
			ctx, cancel := context.WithTimeout(t.Context(), delay/2)
			_, err = a.Renew(ctx, lease, short)
			cancel()
			if err == nil || errors.Is(err, distlock.ErrNotHeld) {
				t.Fatalf("Renew whose reply is lost: %v, want a transport error", err)
			}
			// The Renew's statement runs when the proxy delivers it.
			if !poll(t, 10*time.Second, func() bool { return updates() != ran }) {
				t.Fatal("the Renew's statement did not run within 10s")
			}
			arrived := time.Now()
			for end := arrived.Add(short + grace); time.Now().Before(end); {
				lb, err := b.TryLock(opCtx(t), key, time.Minute)
				if err == nil {
					_ = b.Unlock(opCtx(t), lb)
					t.Fatalf("another client acquired the key %v after the shorter Renew's statement arrived, while the holder's Expires was still %v ahead",
						time.Since(arrived).Round(time.Millisecond), time.Until(lease.Expires).Round(time.Millisecond))
				}
				if !errors.Is(err, distlock.ErrLocked) {
					t.Fatalf("TryLock of the held key: %v, want ErrLocked", err)
				}
				time.Sleep(25 * time.Millisecond) // pacing the attempts, bounded by end
			}
			p.Heal()
			if err := a.Unlock(opCtx(t), lease); err != nil {
				t.Fatalf("Unlock with the old lease after the lost Renew: %v", err)
			}
		})
	}
}
