package redislock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
	"github.com/distlock/distlock/redislock"
)

// cmdCounter is a go-redis hook that counts the commands a client sent and got
// the reply of, by name. (Pub/sub commands bypass hooks.)
type cmdCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *cmdCounter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c.mu.Lock()
		if c.n == nil {
			c.n = make(map[string]int)
		}
		c.n[cmd.Name()]++
		c.mu.Unlock()
		return err
	}
}

func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// numSub returns how many connections subscribe to channel (-1 after an error,
// which fails t). It may run off the test's goroutine.
func numSub(t *testing.T, raw *redis.Client, channel string) int64 {
	n, err := raw.PubSubNumSub(t.Context(), channel).Result()
	if err != nil {
		t.Errorf("PUBSUB NUMSUB: %v", err)
		return -1
	}
	return n[channel]
}

// waitAsync runs l.Wait(ctx, key) on a goroutine.
func waitAsync(ctx context.Context, l *redislock.Locker, key string) <-chan error {
	woke := make(chan error, 1)
	go func() { woke <- l.Wait(ctx, key) }()
	return woke
}

// expectBlocked fails t if woke delivers within d.
func expectBlocked(t *testing.T, woke <-chan error, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-woke:
		t.Fatalf("Wait returned %v while the key was held", err)
	case <-timer.C:
	}
}

// expectWoke fails t unless woke delivers nil within d.
func expectWoke(t *testing.T, woke <-chan error, d time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("Wait (%s): %v", what, err)
		}
	case <-timer.C:
		t.Fatalf("Wait did not return within %v of %s", d, what)
	}
}

// TestWaitsShareOneSubscription: concurrent Waits of one Locker on one key use one
// subscription, all wake on Unlock, and Close ends the subscription; a Wait after
// Close returns ErrClosed.
func TestWaitsShareOneSubscription(t *testing.T) {
	a := newLocker(t, nil)
	b := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	key := testKey(t)
	_, _, channel := b.Names(key)
	la, err := a.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const waits = 5
	woke := make([]<-chan error, waits)
	for i := range woke {
		woke[i] = waitAsync(ctxT(t), b, key)
	}
	require.Eventually(t, func() bool { return numSub(t, raw, channel) > 0 }, 5*time.Second, 2*time.Millisecond, "the Waits to subscribe")
	expectBlocked(t, woke[0], 50*time.Millisecond)
	if n := numSub(t, raw, channel); n != 1 {
		t.Fatalf("%d Waits of one Locker hold %d subscriptions, want 1", waits, n)
	}
	if err := a.Unlock(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	for _, w := range woke {
		expectWoke(t, w, 5*time.Second, "Unlock")
	}
	// The channel stays subscribed for the next Wait of a wait loop, until Close.
	if n := numSub(t, raw, channel); n != 1 {
		t.Fatalf("after the Waits: %d subscriptions, want the 1 kept for the next Wait", n)
	}
	require.NoError(t, b.Close())
	// Close waited for the hub: the server has dropped the subscription by now or
	// soon (it learns of the closed connection asynchronously).
	require.Eventually(t, func() bool { return numSub(t, raw, channel) == 0 }, 5*time.Second, 2*time.Millisecond, "Close to end the subscription")
	require.ErrorIs(t, b.Wait(ctxT(t), key), distlock.ErrClosed)
}

// TestCloseWakesWaits: Close makes a Wait in progress return ErrClosed.
func TestCloseWakesWaits(t *testing.T) {
	a := newLocker(t, nil)
	b := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	key := testKey(t)
	_, _, channel := b.Names(key)
	la, err := a.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Unlock(context.Background(), la) }()
	w := waitAsync(ctxT(t), b, key)
	require.Eventually(t, func() bool { return numSub(t, raw, channel) > 0 }, 5*time.Second, 2*time.Millisecond, "Wait to subscribe")
	require.NoError(t, b.Close())
	select {
	case err := <-w:
		require.ErrorIs(t, err, distlock.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return within 5s of Close")
	}
}

// TestWaitAfterTryLock: a Wait that follows a TryLock which found the key held while
// the channel was subscribed reads no time to live (that TryLock was its check),
// still wakes on Unlock, and returns at once when the release came between the
// TryLock and the Wait.
func TestWaitAfterTryLock(t *testing.T) {
	var cc cmdCounter
	cb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	cb.AddHook(&cc)
	t.Cleanup(func() { _ = cb.Close() })
	a := newLocker(t, nil)
	b := newLockerOn(t, cb, nil)
	key := testKey(t)

	la, err := a.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The first Wait reads the time to live at once, subscribes and reads it again
	// once subscribed; it is cancelled once it has (the channel stays subscribed).
	ctx, cancel := context.WithCancel(t.Context())
	first := waitAsync(ctx, b, key)
	require.Eventually(t, func() bool { return cc.count("pttl") == 2 }, 10*time.Second, 2*time.Millisecond, "the first Wait to read the time to live after subscribing")
	cancel()
	if err := <-first; !errors.Is(err, distlock.ErrLocked) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait on a held key: %v", err)
	}

	// TryLock, Wait: no PTTL; Unlock wakes the Wait.
	if _, err := b.TryLock(ctxT(t), key, time.Minute); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a held key: %v", err)
	}
	w := waitAsync(ctxT(t), b, key)
	expectBlocked(t, w, 100*time.Millisecond)
	if n := cc.count("pttl"); n != 2 {
		t.Fatalf("a Wait after a TryLock that found the key held sent PTTL (%d in all)", n)
	}
	if err := a.Unlock(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	expectWoke(t, w, 5*time.Second, "Unlock")

	// TryLock, Unlock by the holder, Wait: the Wait returns at once.
	if la, err = a.TryLock(ctxT(t), key, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctxT(t), key, time.Minute); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a held key: %v", err)
	}
	if err := a.Unlock(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	// The release message reaches b's subscription at some point: before or
	// during the Wait, it returns at once (and if it has not arrived by the time
	// Wait checks, Wait waits for it).
	start := time.Now()
	if err := b.Wait(ctxT(t), key); err != nil {
		t.Fatalf("Wait after a release that followed the TryLock: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Wait after a release that followed the TryLock took %v", took)
	}
}

// TestWaitSurvivesBrokenSubscription: when the server kills the shared pub/sub
// connection, Waits in progress return (a release may have been missed), and the
// next Wait subscribes again and wakes on Unlock.
func TestWaitSurvivesBrokenSubscription(t *testing.T) {
	a := newLocker(t, nil)
	b := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	key := testKey(t)
	_, _, channel := b.Names(key)
	la, err := a.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w := waitAsync(ctxT(t), b, key)
	require.Eventually(t, func() bool { return numSub(t, raw, channel) > 0 }, 5*time.Second, 2*time.Millisecond, "Wait to subscribe")
	if err := raw.Do(ctxT(t), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	expectWoke(t, w, 5*time.Second, "the kill of its connection")
	w = waitAsync(ctxT(t), b, key)
	require.Eventually(t, func() bool { return numSub(t, raw, channel) > 0 }, 5*time.Second, 2*time.Millisecond, "Wait to subscribe again")
	expectBlocked(t, w, 100*time.Millisecond)
	if err := a.Unlock(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	expectWoke(t, w, 5*time.Second, "Unlock")
}

// TestWaitDetectsDeadSubscription: a pub/sub connection that goes silent (a
// blackhole does not break it) is pinged, then replaced; the Wait in progress,
// whose release message was lost, returns long before the holder's ttl.
func TestWaitDetectsDeadSubscription(t *testing.T) {
	p, err := faultproxy.New(redisSrv.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cb := redis.NewClient(&redis.Options{Addr: p.Addr(), DialTimeout: time.Second})
	var cc cmdCounter
	cb.AddHook(&cc)
	t.Cleanup(func() { _ = cb.Close() })
	b := newLockerOn(t, cb, redislock.WithHub(nil, 100*time.Millisecond, 0, 0))
	a := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	key := testKey(t)
	_, _, channel := b.Names(key)
	la, err := a.TryLock(ctxT(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w := waitAsync(ctxT(t), b, key)
	require.Eventually(t, func() bool { return numSub(t, raw, channel) > 0 }, 5*time.Second, 2*time.Millisecond, "Wait to subscribe")
	// Once Wait has read the time to live (through the proxy) it only listens.
	require.Eventually(t, func() bool { return cc.count("pttl") == 2 }, 5*time.Second, 2*time.Millisecond, "Wait to read the time to live after subscribing")
	p.Blackhole()
	start := time.Now()
	if err := a.Unlock(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	expectWoke(t, w, 5*time.Second, "the silence of its connection")
	t.Logf("Wait returned %v after the blackhole", time.Since(start))
	p.Heal()
}
