package redislock_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/redislock"
)

// scriptWatch is a go-redis hook that counts the runs of one script (EVALSHA, or
// the EVAL after NOSCRIPT) that got a reply without error.
type scriptWatch struct {
	hash string
	n    atomic.Int64
}

func (w *scriptWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *scriptWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err != nil || len(args) < 2 {
			return err
		}
		switch body, _ := args[1].(string); cmd.Name() {
		case "evalsha":
			if body == w.hash {
				w.n.Add(1)
			}
		case "eval":
			if fmt.Sprintf("%x", sha1.Sum([]byte(body))) == w.hash {
				w.n.Add(1)
			}
		}
		return err
	}
}

func (w *scriptWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// proxiedLocker returns a Locker whose client reaches redisSrv through a fault proxy
// of its own, with its connection and scripts warmed up (so a Delay slows one round
// trip per call, not a dial and a NOSCRIPT fallback too).
func proxiedLocker(t *testing.T) (*redislock.Locker, *redis.Client, *faultproxy.Proxy) {
	t.Helper()
	p, err := faultproxy.New(redisSrv.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	l := newLockerOn(t, c, nil)
	key := testKey(t) + "-warm-up"
	lease, err := l.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(ctxT(t), lease, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctxT(t), lease); err != nil {
		t.Fatal(err)
	}
	return l, c, p
}

// TestReplyAfterTTL: when the round trip outlasts the ttl, TryLock and Renew return
// an error (not ErrLocked, not ErrNotHeld) instead of a lease that has already
// expired, and TryLock removes the lock it made.
func TestReplyAfterTTL(t *testing.T) {
	a, ca, p := proxiedLocker(t)
	watch := &scriptWatch{hash: redislock.AbandonScriptHash()}
	ca.AddHook(watch)
	raw := newClient(t, redisSrv)
	key := testKey(t)
	held, err := a.TryLock(ctxT(t), testKey(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 100 * time.Millisecond
	p.Delay(ttl) // each way: a round trip of at least 2*ttl
	lease, err := a.TryLock(ctxT(t), key, ttl)
	switch {
	case err == nil:
		t.Fatalf("TryLock with a round trip of 2*ttl returned a lease that expired %v ago", -lease.Remaining())
	case errors.Is(err, distlock.ErrLocked):
		t.Fatalf("TryLock of a free key whose reply came after its ttl: got ErrLocked: %v", err)
	}
	t.Logf("TryLock: %v", err)
	renewed, err := a.Renew(ctxT(t), held, ttl)
	switch {
	case err == nil:
		t.Fatalf("Renew with a round trip of 2*ttl returned a lease that expired %v ago", -renewed.Remaining())
	case errors.Is(err, distlock.ErrNotHeld):
		t.Fatalf("Renew of a held lease whose reply came after its ttl: got ErrNotHeld: %v", err)
	}
	t.Logf("Renew: %v", err)
	// The late TryLock's lock is removed by its cleanup script, not just by expiry.
	require.Eventually(t, func() bool { return watch.n.Load() >= 1 }, 5*time.Second, 2*time.Millisecond,
		"TryLock to remove the lock of its expired lease")
	lock, _, _ := a.Names(key)
	if n := raw.Exists(ctxT(t), lock).Val(); n != 0 {
		t.Fatalf("the expired TryLock's lock is still there after its removal")
	}
	p.Delay(0)
	// The slow Renew did not cut the held lease to ttl.
	heldLock, _, _ := a.Names(held.Key)
	if left := raw.PTTL(ctxT(t), heldLock).Val(); left < 30*time.Second {
		t.Fatalf("after a slow Renew with ttl %v the held lock has %v left, want about a minute", ttl, left)
	}
	if err := a.Unlock(ctxT(t), held); err != nil {
		t.Fatal(err)
	}
}

// TestRenewNeverShortens: a Renew with a ttl shorter than what the lock has left
// succeeds with Expires = start + ttl and leaves the server's expiry as it was; a
// longer one extends it.
func TestRenewNeverShortens(t *testing.T) {
	l := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	key := testKey(t)
	lock, _, _ := l.Names(key)
	lease, err := l.TryLock(ctxT(t), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	short, err := l.Renew(ctxT(t), lease, time.Second)
	if err != nil {
		t.Fatalf("Renew with a shorter ttl: %v", err)
	}
	end := time.Now()
	if short.Expires.Before(start.Add(time.Second)) || short.Expires.After(end.Add(time.Second)) {
		t.Fatalf("Renew with ttl 1s returned Expires %v after the call started (it took %v), want start + 1s", short.Expires.Sub(start), end.Sub(start))
	}
	if left := raw.PTTL(ctxT(t), lock).Val(); left < 25*time.Second {
		t.Fatalf("Renew with ttl 1s cut the lock's time to live to %v; it must keep about 30s", left)
	}
	long, err := l.Renew(ctxT(t), short, time.Minute)
	if err != nil {
		t.Fatalf("Renew with a longer ttl: %v", err)
	}
	if left := raw.PTTL(ctxT(t), lock).Val(); left < 55*time.Second {
		t.Fatalf("Renew with ttl 1m left the lock's time to live at %v", left)
	}
	if err := l.Unlock(ctxT(t), long); err != nil {
		t.Fatal(err)
	}
}

// TestShorteningRenewLostReply: the holder of a 30s lease renews it with ttl 2s and
// loses the reply (its context ends while the request is delayed); the request still
// reaches the server. Another client must stay locked out until well after 2s: the
// old Expires still bounds the lease.
func TestShorteningRenewLostReply(t *testing.T) {
	a, _, p := proxiedLocker(t)
	b := newLocker(t, nil)
	key := testKey(t)
	lease, err := a.TryLock(ctxT(t), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const short = 2 * time.Second
	before := p.Stats()
	p.Delay(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	start := time.Now()
	_, err = a.Renew(ctx, lease, short)
	cancel()
	if err == nil || errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Renew whose reply is delayed past its context: got %v, want a context error", err)
	}
	// The request reached the server and ran: its reply came back through the proxy.
	require.Eventually(t, func() bool {
		s := p.Stats()
		return s.BytesToServer > before.BytesToServer && s.BytesToClient > before.BytesToClient
	}, 5*time.Second, 2*time.Millisecond, "the lost Renew's reply to come back")
	p.Delay(0)
	until := start.Add(short + time.Second)
	for time.Now().Before(until) {
		lb, err := b.TryLock(ctxT(t), key, time.Minute)
		if err == nil {
			_ = b.Unlock(ctxT(t), lb)
			t.Fatalf("another client acquired %v after a Renew with ttl %v whose reply was lost, while the holder's Expires is %v ahead",
				time.Since(start), short, lease.Remaining())
		}
		if !errors.Is(err, distlock.ErrLocked) {
			t.Fatal(err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := a.Unlock(ctxT(t), lease); err != nil {
		t.Fatalf("Unlock of the lease whose Renew lost its reply: %v", err)
	}
}
