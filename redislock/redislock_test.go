package redislock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/redislock"
)

// trickyKeys are keys that must all be distinct, safe locks.
var trickyKeys = []string{
	"a", "A", "a/b", "a b", " ", "{", "}", "{}", "}{", "{a}", "{a}b", "a{b}", "x{a}",
	"\x00", "a\x00", "a\x00b", "ключ", "鍵", "🔒", "a|b", "a:lock:b", "{distlock}",
	strings.Repeat("k", redislock.MaxKeyLen),
}

func TestOptionsInvalid(t *testing.T) {
	c := newClient(t, redisSrv)
	cases := []struct {
		name   string
		client redis.UniversalClient
		opts   *redislock.Options
		want   string
	}{
		{"NilClient", nil, nil, "nil redis client"},
		{"PrefixOpenBrace", c, &redislock.Options{Prefix: "app{"}, `Options.Prefix "app{"`},
		{"PrefixCloseBrace", c, &redislock.Options{Prefix: "app}"}, `Options.Prefix "app}"`},
		{"LongOwner", c, &redislock.Options{Owner: strings.Repeat("o", redislock.MaxOwnerLen+1)}, "Options.Owner of 257 bytes"},
		{"NegativeCleanupTimeout", c, &redislock.Options{CleanupTimeout: -time.Second}, "Options.CleanupTimeout -1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redislock.New(tc.client, tc.opts)
			require.Nil(t, l)
			require.ErrorIs(t, err, distlock.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			var oe *distlock.OpError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, distlock.OpError{Backend: "redislock", Op: "New", Err: oe.Err}, *oe)
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	l := newLocker(t, nil)
	host, _ := os.Hostname()
	require.Equal(t, host+":"+strconv.Itoa(os.Getpid()), l.Owner(), "default Owner")
	lock, fence, channel := l.Names("k")
	for _, name := range []string{lock, fence, channel} {
		require.True(t, strings.HasPrefix(name, redislock.DefaultPrefix+":{"), "default prefix not used: %q", name)
	}
	_, err := l.TryLock(ctxT(t), strings.Repeat("k", redislock.MaxKeyLen+1), time.Second)
	require.ErrorIs(t, err, distlock.ErrInvalid, "key over MaxKeyLen")
}

// TestClose: Close is idempotent, leaves the client open, and every call after it
// returns an *OpError wrapping ErrClosed, naming its operation.
func TestClose(t *testing.T) {
	c := newClient(t, redisSrv)
	l, err := redislock.New(c, nil)
	require.NoError(t, err)
	ctx := ctxT(t)
	lease, err := l.TryLock(ctx, testKey(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "second Close")
	require.NoError(t, c.Ping(ctx).Err(), "Close closed the client")
	closed := func(op string, err error) {
		t.Helper()
		require.ErrorIs(t, err, distlock.ErrClosed, op)
		var oe *distlock.OpError
		require.ErrorAs(t, err, &oe, op)
		require.Equal(t, op, oe.Op)
		require.Equal(t, "redislock", oe.Backend)
	}
	_, err = l.TryLock(ctx, "k", time.Second)
	closed("TryLock", err)
	_, err = l.Renew(ctx, lease, time.Second)
	closed("Renew", err)
	closed("Unlock", l.Unlock(ctx, lease))
	closed("Wait", l.Wait(ctx, "k"))
	_, err = l.Inspect(ctx, "k")
	closed("Inspect", err)
	_, err = l.CheckServer(ctx)
	closed("CheckServer", err)
}

// TestKeyLayout checks the Redis names against the documented layout, independently
// computed, for keys full of separators and braces.
func TestKeyLayout(t *testing.T) {
	raw := newClient(t, redisSrv)
	prefix := "layout-" + driver.NewToken()[:6]
	l := newLocker(t, &redislock.Options{Prefix: prefix, Owner: "tester"})
	ctx := ctxT(t)
	for _, key := range trickyKeys {
		sum := sha256.Sum256([]byte(key))
		base := prefix + ":{" + hex.EncodeToString(sum[:8]) + "}:"
		lock, fence, channel := l.Names(key)
		if lock != base+"lock:"+key || fence != base+"fence:"+key || channel != base+"release:"+key {
			t.Fatalf("names of %q = %q %q %q; want base %q", key, lock, fence, channel, base)
		}
		lease, err := l.TryLock(ctx, key, time.Minute)
		if err != nil {
			t.Fatalf("TryLock(%q): %v (keys that differ must be different locks)", key, err)
		}
		v, err := raw.Get(ctx, lock).Result()
		if err != nil {
			t.Fatalf("GET %q: %v", lock, err)
		}
		if want := lease.Token + "|tester"; v != want {
			t.Fatalf("lock value %q, want %q", v, want)
		}
		if f, err := raw.Get(ctx, fence).Uint64(); err != nil || f != lease.Fence {
			t.Fatalf("fence key %q = %d, %v; want %d", fence, f, err, lease.Fence)
		}
		if ttl, err := raw.PTTL(ctx, fence).Result(); err != nil || ttl != -1 {
			t.Fatalf("fence key PTTL = %v, %v; want no expiry", ttl, err)
		}
	}
	n, err := raw.Keys(ctx, prefix+":*").Result()
	if err != nil || len(n) != 2*len(trickyKeys) {
		t.Fatalf("KEYS %s:* found %d keys (%v), want %d", prefix, len(n), err, 2*len(trickyKeys))
	}
}

// TestClusterSlots checks on the Cluster that a key's lock key, fence key and
// channel share one slot whatever braces the key holds, and that keys spread.
func TestClusterSlots(t *testing.T) {
	node := newClient(t, cluster.Nodes[0])
	l := newLocker(t, nil)
	ctx := ctxT(t)
	slots := map[int64]bool{}
	keys := append([]string{}, trickyKeys...)
	for i := range 200 {
		keys = append(keys, "{same}"+strconv.Itoa(i))
	}
	for _, key := range keys {
		lock, fence, channel := l.Names(key)
		var got [3]int64
		for i, name := range []string{lock, fence, channel} {
			s, err := node.ClusterKeySlot(ctx, name).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT: %v", err)
			}
			got[i] = s
		}
		if got[0] != got[1] || got[0] != got[2] {
			t.Fatalf("key %q: lock, fence and channel in slots %v", key, got)
		}
		slots[got[0]] = true
	}
	// 223 keys, 100 of them with the same user hash tag, over 16384 slots.
	if len(slots) < 200 {
		t.Fatalf("%d keys landed in only %d slots: the user's braces leak into the hash tag", len(keys), len(slots))
	}
}

func TestPrefixesAreSeparate(t *testing.T) {
	ctx := ctxT(t)
	a := newLocker(t, &redislock.Options{Prefix: "pa"})
	a2 := newLocker(t, &redislock.Options{Prefix: "pa"})
	b := newLocker(t, &redislock.Options{Prefix: "pa:"})
	key := testKey(t)
	if _, err := a.TryLock(ctx, key, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, key, time.Minute); err != nil {
		t.Fatalf("TryLock with another prefix: %v", err)
	}
	if _, err := a2.TryLock(ctx, key, time.Minute); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock with the same prefix: got %v, want ErrLocked", err)
	}
}

func TestLockedNamesHolderAndInspect(t *testing.T) {
	ctx := ctxT(t)
	a := newLocker(t, &redislock.Options{Owner: "worker-7|eu"})
	b := newLocker(t, &redislock.Options{Owner: "worker-8"})
	key := testKey(t)
	start := time.Now()
	la, err := a.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryLock(ctx, key, time.Minute)
	if !errors.Is(err, distlock.ErrLocked) || !strings.Contains(err.Error(), `"worker-7|eu"`) {
		t.Fatalf("TryLock of a held key: got %v, want ErrLocked naming the owner", err)
	}
	h, err := b.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if h.Key != key || h.Fence != la.Fence || h.Owner != "worker-7|eu" {
		t.Fatalf("Inspect = %+v, want key %q fence %d owner worker-7|eu", h, key, la.Fence)
	}
	if h.Expires.Before(start.Add(time.Minute-time.Second)) || h.Expires.After(time.Now().Add(time.Minute)) {
		t.Fatalf("Inspect Expires %v from now, want about a minute", time.Until(h.Expires))
	}
	if err := a.Unlock(ctx, la); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inspect(ctx, key); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Inspect of a free key: got %v, want ErrNotHeld", err)
	}
}

// TestResentAcquireIsIdempotent: go-redis resends a script whose connection broke;
// the resent acquire must return the same fence, not ErrLocked, and must not
// increment the fence again.
func TestResentAcquireIsIdempotent(t *testing.T) {
	ctx := ctxT(t)
	l := newLocker(t, nil)
	key := testKey(t)
	token := driver.NewToken()
	f1, err := l.Acquire(ctx, key, token, time.Minute)
	if err != nil || f1 <= 0 {
		t.Fatalf("first acquire: fence %d, %v", f1, err)
	}
	f2, err := l.Acquire(ctx, key, token, time.Minute)
	if err != nil || f2 != f1 {
		t.Fatalf("resent acquire: fence %d, %v; want %d", f2, err, f1)
	}
	f3, err := l.Acquire(ctx, key, driver.NewToken(), time.Minute)
	if err != nil || f3 != 0 {
		t.Fatalf("acquire with another token: fence %d, %v; want 0 (locked)", f3, err)
	}
	if err := l.Unlock(ctx, distlock.Lease{Key: key, Token: token, Fence: uint64(f1)}); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryLock(ctx, key, time.Minute)
	if err != nil || lease.Fence != uint64(f1)+1 {
		t.Fatalf("next TryLock: fence %d, %v; want %d", lease.Fence, err, f1+1)
	}
}

// TestTTLRoundsUp: the server must never free a key before Expires, so a ttl with a
// fraction of a millisecond is rounded up; one shorter than the round trip gives an
// error (the lease would have expired before its reply), never ErrLocked.
func TestTTLRoundsUp(t *testing.T) {
	ctx := ctxT(t)
	raw := newClient(t, redisSrv)
	l := newLocker(t, nil)
	if _, err := l.TryLock(ctx, testKey(t), time.Nanosecond); err == nil || errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock ttl 1ns: got %v, want an error (the reply comes after the ttl) that is not ErrLocked", err)
	}
	for _, tc := range []struct {
		ttl  time.Duration
		want time.Duration
	}{
		{time.Second + time.Nanosecond, time.Second + time.Millisecond},
		{time.Second + 1500*time.Microsecond, time.Second + 2*time.Millisecond},
		{time.Hour + time.Nanosecond, time.Hour + time.Millisecond},
	} {
		key := testKey(t)
		lease, err := l.TryLock(ctx, key, tc.ttl)
		if err != nil {
			t.Fatalf("TryLock ttl %v: %v", tc.ttl, err)
		}
		lock, _, _ := l.Names(key)
		if got, err := raw.PTTL(ctx, lock).Result(); err != nil || got > tc.want {
			t.Fatalf("ttl %v: server PTTL %v, %v; want at most %v", tc.ttl, got, err, tc.want)
		}
		if tc.ttl < time.Hour {
			continue
		}
		// Renew rounds the same way.
		if _, err := l.Renew(ctx, lease, tc.ttl); err != nil {
			t.Fatal(err)
		}
		if got, err := raw.PTTL(ctx, lock).Result(); err != nil || got <= tc.want-10*time.Millisecond || got > tc.want {
			t.Fatalf("renewed ttl %v: server PTTL %v, %v; want about %v", tc.ttl, got, err, tc.want)
		}
	}
}

// TestCutWhileHolding: the holder's proxy resets every connection and refuses new
// ones. Its Renew fails at once (not with ErrNotHeld: the outcome is unknown); nobody
// gets the key before the holder's Expires; after it, another client does, with a
// higher fence; once the cut heals, the old holder learns it lost the key and its
// Unlock leaves the new holder alone.
func TestCutWhileHolding(t *testing.T) {
	ctx := ctxT(t)
	p, err := faultproxy.New(redisSrv.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ca := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = ca.Close() })
	a := newLockerOn(t, ca, nil)
	b := newLocker(t, nil)
	key := testKey(t)
	const ttl = 500 * time.Millisecond

	la, err := a.TryLock(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	start := time.Now()
	_, err = a.Renew(ctx, la, ttl)
	if err == nil || errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Renew through a cut: got %v, want a transport error", err)
	}
	// go-redis retries a reset connection (MaxRetries 3, backoff up to 512ms).
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Renew through a cut took %v; a reset must fail fast", took)
	}
	if _, err := a.TryLock(ctx, testKey(t), ttl); err == nil || errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock through a cut: got %v, want a transport error that is not ErrLocked", err)
	}
	var lb distlock.Lease
	for {
		attempt := time.Now()
		lb, err = b.TryLock(ctx, key, time.Minute)
		if err == nil {
			if attempt.Before(la.Expires) {
				t.Fatalf("key taken %v before the cut holder's Expires", la.Expires.Sub(attempt))
			}
			break
		}
		if !errors.Is(err, distlock.ErrLocked) {
			t.Fatal(err)
		}
		if time.Now().After(la.Expires.Add(2 * time.Second)) {
			t.Fatalf("key still locked 2s after the cut holder's Expires: %v", err)
		}
		w, cancel := context.WithTimeout(ctx, time.Second)
		_ = b.Wait(w, key)
		cancel()
	}
	if lb.Fence <= la.Fence {
		t.Fatalf("fence %d after the cut holder's %d", lb.Fence, la.Fence)
	}
	p.Heal()
	if _, err := a.Renew(ctx, la, ttl); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("old holder's Renew after healing: got %v, want ErrNotHeld", err)
	}
	if err := a.Unlock(ctx, la); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("old holder's Unlock after healing: got %v, want ErrNotHeld", err)
	}
	if err := b.Unlock(ctx, lb); err != nil {
		t.Fatalf("new holder's Unlock: %v (the stale Unlock released it?)", err)
	}
}

// TestCancelWithoutDeadline: go-redis ignores a cancelled context while it waits for
// a reply; the Locker must not. TryLock through a blackhole returns promptly when its
// context (which has no deadline) is cancelled, and the half-made lock is removed
// once the network heals.
func TestCancelWithoutDeadline(t *testing.T) {
	p, err := faultproxy.New(redisSrv.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ca := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	t.Cleanup(func() { _ = ca.Close() })
	a := newLockerOn(t, ca, nil)
	b := newLocker(t, nil)
	key := testKey(t)
	// Warm the connection, then delay every byte: the request reaches the server
	// after TryLock gave up.
	if err := ca.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	p.Delay(300 * time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	stop := time.AfterFunc(50*time.Millisecond, cancel)
	defer stop.Stop()
	start := time.Now()
	_, err = a.TryLock(ctx, key, time.Minute)
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) || errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("cancelled TryLock: got %v, want context.Canceled and not ErrLocked", err)
	}
	if took > 250*time.Millisecond {
		t.Fatalf("cancelled TryLock returned after %v, want about 50ms", took)
	}
	// The delayed request reaches the server ~300ms in and takes the lock; its reply
	// reaches the abandoned attempt ~300ms later, which then removes the lock (its
	// unlock is delayed too). The ttl is a minute: only that removal frees the key.
	raw := newClient(t, redisSrv)
	lock, _, _ := a.Names(key)
	require.Eventually(t, func() bool { return raw.Exists(t.Context(), lock).Val() == 1 },
		5*time.Second, 2*time.Millisecond, "the delayed request to take the lock")
	require.Eventually(t, func() bool { return raw.Exists(t.Context(), lock).Val() == 0 },
		5*time.Second, 2*time.Millisecond, "the abandoned attempt to remove its lock")
	lb, err := b.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatalf("TryLock after the abandoned attempt's cleanup: %v", err)
	}
	if err := b.Unlock(ctxT(t), lb); err != nil {
		t.Fatal(err)
	}
}

// TestWaitLatency measures how soon Wait returns after Unlock, through pub/sub.
func TestWaitLatency(t *testing.T) {
	a := newLocker(t, nil)
	b := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	var worst time.Duration
	var total time.Duration
	const rounds = 20
	for range rounds {
		key := testKey(t)
		la, err := a.TryLock(ctxT(t), key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		woke := make(chan error, 1)
		go func() { woke <- b.Wait(ctxT(t), key) }()
		// Measure the pub/sub path: unlock once the server counts Wait's
		// subscription (polled, bounded by a deadline).
		_, _, channel := a.Names(key)
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := raw.PubSubNumSub(ctxT(t), channel).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n[channel] > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("Wait did not subscribe within 5s")
			}
			select {
			case err := <-woke:
				t.Fatalf("Wait returned %v while the key was held", err)
			case <-time.After(time.Millisecond):
			}
		}
		unlocked := time.Now()
		if err := a.Unlock(ctxT(t), la); err != nil {
			t.Fatal(err)
		}
		if err := <-woke; err != nil {
			t.Fatalf("Wait: %v", err)
		}
		d := time.Since(unlocked)
		total += d
		worst = max(worst, d)
	}
	t.Logf("Wait returned %v after Unlock on average, %v at worst (%d rounds)", total/rounds, worst, rounds)
	if worst > time.Second {
		t.Fatalf("Wait returned %v after Unlock", worst)
	}
}

// TestWaitContext: Wait on a held key returns errors.Join(ErrLocked, ctx.Err()) when
// its context ends, both by deadline and by cancellation.
func TestWaitContext(t *testing.T) {
	a := newLocker(t, nil)
	b := newLocker(t, nil)
	key := testKey(t)
	if _, err := a.TryLock(ctxT(t), key, time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := b.Wait(ctx, key)
	if !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a deadline: got %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Wait with a 100ms deadline took %v", took)
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	stop := time.AfterFunc(50*time.Millisecond, cancel2)
	defer stop.Stop()
	if err := b.Wait(ctx2, key); !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait cancelled: got %v", err)
	}
}

// TestOldLayoutLocks: a lock written in the value layout of earlier versions
// ("<token>|<fence>|<owner>", by a client not yet upgraded) still excludes, and its
// holder (which knows its token) can still renew and release it; fences go on
// from the fence key.
func TestOldLayoutLocks(t *testing.T) {
	ctx := ctxT(t)
	l := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	key := testKey(t)
	lock, fence, _ := l.Names(key)
	token := driver.NewToken()
	if err := raw.Set(ctx, fence, 41, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.Set(ctx, lock, token+"|41|old-worker", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, key, time.Minute); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a lock in the old layout: %v, want ErrLocked", err)
	}
	if h, err := l.Inspect(ctx, key); err != nil || h.Fence != 41 {
		t.Fatalf("Inspect of a lock in the old layout: %+v, %v; want fence 41", h, err)
	}
	old := distlock.Lease{Key: key, Token: token, Fence: 41, Expires: time.Now().Add(time.Minute)}
	if _, err := l.Renew(ctx, old, time.Minute); err != nil {
		t.Fatalf("Renew of a lock in the old layout by its holder: %v", err)
	}
	if err := l.Unlock(ctx, old); err != nil {
		t.Fatalf("Unlock of a lock in the old layout by its holder: %v", err)
	}
	lease, err := l.TryLock(ctx, key, time.Minute)
	if err != nil || lease.Fence != 42 {
		t.Fatalf("TryLock after the old lock: fence %d, %v; want 42", lease.Fence, err)
	}
	if err := l.Unlock(ctx, lease); err != nil {
		t.Fatal(err)
	}
}

// TestTokenWithSeparator: a Lease whose Token contains the value's separator '|' is
// none of ours and owns nothing, even when it starts with the holder's token.
func TestTokenWithSeparator(t *testing.T) {
	ctx := ctxT(t)
	l := newLocker(t, &redislock.Options{Owner: "x|y"})
	key := testKey(t)
	lease, err := l.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	forged := lease
	forged.Token = lease.Token + "|x"
	if _, err := l.Renew(ctx, forged, time.Minute); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Renew with the token plus \"|x\": %v, want ErrNotHeld", err)
	}
	if err := l.Unlock(ctx, forged); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Unlock with the token plus \"|x\": %v, want ErrNotHeld", err)
	}
	if err := l.Unlock(ctx, lease); err != nil {
		t.Fatal(err)
	}
}
