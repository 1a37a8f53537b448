package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redislock"
)

// TestSharedRoundTrips (issue 16, W1): concurrent TryLocks and Unlocks of one Locker,
// on distinct keys, share the server's reads: while one call is in flight, the calls
// that come go out together in one pipeline. Each still costs its own commands.
func TestSharedRoundTrips(t *testing.T) {
	const keys = 1000
	l := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	prefix := testKey(t)
	pairs := func(ctx context.Context) {
		held := make([]distlock.Lease, keys)
		var wg sync.WaitGroup
		for i := range held {
			wg.Go(func() {
				var err error
				held[i], err = l.TryLock(ctx, prefix+"-"+strconv.Itoa(i), time.Minute)
				require.NoError(t, err)
			})
		}
		wg.Wait()
		for _, lease := range held {
			wg.Go(func() { require.NoError(t, l.Unlock(ctx, lease)) })
		}
		wg.Wait()
	}
	ctx := ctxT(t)
	pairs(ctx) // warm up: scripts loaded, connections dialled
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"cancelable", ctx}} {
		cmds, reads := infoStat(t, raw, "total_commands_processed"), infoStat(t, raw, "total_reads_processed")
		pairs(c.ctx)
		// Two INFO commands (one read each) are this test's own.
		cmds = infoStat(t, raw, "total_commands_processed") - cmds - 1
		reads = infoStat(t, raw, "total_reads_processed") - reads - 1
		t.Logf("ctx=%s: %d concurrent TryLocks, then Unlocks: %.2f commands and %.3f server reads per pair",
			c.name, keys, float64(cmds)/keys, float64(reads)/keys)
		// TryLock: EVALSHA, EXISTS (its token's abandoned marker), SET, INCR;
		// Unlock: EVALSHA, GET, DEL, PUBLISH (and a few for the connections
		// go-redis may dial).
		require.LessOrEqual(t, float64(cmds)/keys, 8.05, "commands per pair")
		require.Less(t, float64(reads)/keys, 1.0, "server reads per pair (one call each: 2)")
	}
}

// gateHook holds up the commands (single or pipelined) whose number (from 1, in
// the order they reach the hook) is in gates, until the gate's channel is closed.
type gateHook struct {
	mu    sync.Mutex
	gates map[int64]chan struct{}
	seen  atomic.Int64 // commands and pipelines that reached the hook
	pipes atomic.Int64 // of which pipelines
	sent  []string     // the commands, as text (under mu)
}

func newGateHook(gated ...int64) *gateHook {
	h := &gateHook{gates: map[int64]chan struct{}{}}
	for _, i := range gated {
		h.gates[i] = make(chan struct{})
	}
	return h
}

func (h *gateHook) open(i int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.gates[i])
}

func (h *gateHook) wait(cmds ...redis.Cmder) {
	i := h.seen.Add(1)
	h.mu.Lock()
	g := h.gates[i]
	for _, c := range cmds {
		h.sent = append(h.sent, fmt.Sprint(c.Args()...))
	}
	h.mu.Unlock()
	if g != nil {
		<-g
	}
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.wait(cmd)
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipes.Add(1)
		h.wait(cmds...)
		return next(ctx, cmds)
	}
}

// hookedLocker returns a Locker whose client has h, with its scripts loaded and its
// connection dialled before h counts.
func hookedLocker(t *testing.T, h *gateHook) *redislock.Locker {
	c := newClient(t, redisSrv)
	l := newLockerOn(t, c, nil)
	redislock.SetSharedSlots(l, 1) // the next call queues behind the one in flight
	ctx := ctxT(t)
	lease, err := l.TryLock(ctx, testKey(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx, lease))
	c.AddHook(h)
	return l
}

// startTryLock runs TryLock in the background; its result comes on the channel.
func startTryLock(l *redislock.Locker, ctx context.Context, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		lease, err := l.TryLock(ctx, key, time.Minute)
		if err == nil {
			err = l.Unlock(context.Background(), lease)
		}
		done <- err
	}()
	return done
}

// returns waits for a result on done, for at most 5s.
func returns(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// TestSharedCancelQueued: a TryLock that waits in the queue for the call in flight
// returns its context's error as soon as the context ends, and its script is never
// sent.
func TestSharedCancelQueued(t *testing.T) {
	h := newGateHook(1)
	l := hookedLocker(t, h)
	first := startTryLock(l, context.Background(), testKey(t))
	require.Eventually(t, func() bool { return h.seen.Load() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	key := testKey(t)
	queued := startTryLock(l, ctx, key)
	require.Eventually(t, func() bool { return redislock.SharedPending(l) == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	err := returns(t, queued, "the queued TryLock")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, distlock.ErrLocked)
	require.Zero(t, redislock.SharedPending(l), "it left the queue")
	h.open(1)
	require.NoError(t, returns(t, first, "the first TryLock"))
	lock, _, _ := l.Names(key)
	require.Zero(t, newClient(t, redisSrv).Exists(ctxT(t), lock).Val(), "the queued TryLock took the lock")
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cmd := range h.sent {
		if strings.Contains(cmd, lock) { // only TryLock's cleanup may name it
			require.Contains(t, cmd, redislock.AbandonScriptHash(), "the queued TryLock was sent")
		}
	}
}

// TestSharedCancelInFlight: a TryLock whose batch is in flight returns its context's
// error as soon as the context ends, and the lock that its script takes later is
// removed.
func TestSharedCancelInFlight(t *testing.T) {
	h := newGateHook(1, 2)
	l := hookedLocker(t, h)
	first := startTryLock(l, context.Background(), testKey(t))
	require.Eventually(t, func() bool { return h.seen.Load() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	key := testKey(t)
	batched := startTryLock(l, ctx, key)
	require.Eventually(t, func() bool { return redislock.SharedPending(l) == 1 }, 5*time.Second, time.Millisecond)
	h.open(1) // the first goes on; the queued one is sent, and held up (gate 2)
	require.Eventually(t, func() bool { return h.seen.Load() >= 2 }, 5*time.Second, time.Millisecond)
	cancel()
	err := returns(t, batched, "the TryLock in flight")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, distlock.ErrLocked)
	// Its script takes the lock now, and the Locker removes it; the first
	// TryLock's Unlock goes after it.
	h.open(2)
	require.NoError(t, returns(t, first, "the first TryLock"))
	requireLockGone(t, l, key, "the lock of the abandoned TryLock stayed")
}

// TestSharedUnlockCancelQueued: an Unlock that waits in the queue returns its
// context's error as soon as the context ends, and is still sent: the lock goes
// when the call in flight ends, not at its ttl.
func TestSharedUnlockCancelQueued(t *testing.T) {
	h := newGateHook(2)
	l := hookedLocker(t, h)
	key := testKey(t)
	lease, err := l.TryLock(ctxT(t), key, time.Minute) // command 1
	require.NoError(t, err)
	first := startTryLock(l, context.Background(), testKey(t)) // command 2: held up
	require.Eventually(t, func() bool { return h.seen.Load() == 2 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Unlock(ctx, lease) }()
	require.Eventually(t, func() bool { return redislock.SharedPending(l) == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	err = returns(t, done, "the queued Unlock")
	require.ErrorIs(t, err, context.Canceled)
	h.open(2)
	require.NoError(t, returns(t, first, "the first TryLock"))
	requireLockGone(t, l, key, "the cancelled Unlock was not sent")
}

// TestSharedManyCancelled: concurrent TryLock+Unlock pairs whose contexts end at
// random moments (queued, in flight, or not at all) each get their own result or
// their context's error, and leave no lock behind.
func TestSharedManyCancelled(t *testing.T) {
	const workers, rounds = 32, 30
	l := newLocker(t, nil)
	raw := newClient(t, redisSrv)
	prefix := testKey(t)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := prefix + "-" + strconv.Itoa(w)
			for i := range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%10)*100*time.Microsecond)
				lease, err := l.TryLock(ctx, key, time.Minute)
				if err == nil {
					require.Equal(t, key, lease.Key)
					if err = l.Unlock(ctx, lease); err != nil {
						require.ErrorIs(t, err, context.DeadlineExceeded)
						// A context that had ended before Unlock sent nothing;
						// one that ended while it waited or was in flight did.
						err = l.Unlock(context.Background(), lease)
						if err != nil {
							require.ErrorIs(t, err, distlock.ErrNotHeld)
						}
					}
				} else if !errors.Is(err, distlock.ErrLocked) { // a release in flight, or a cleanup, still holds it
					require.ErrorIs(t, err, context.DeadlineExceeded)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Close()) // waits for the cleanups
	for w := range workers {
		lock, _, _ := l.Names(prefix + "-" + strconv.Itoa(w))
		require.Zero(t, raw.Exists(context.Background(), lock).Val(), "worker %d's lock stayed", w)
	}
}

// requireLockGone waits until key's lock is gone from the server, and fails with
// msg if it stays.
func requireLockGone(t *testing.T, l *redislock.Locker, key, msg string) {
	t.Helper()
	lock, _, _ := l.Names(key)
	raw := newClient(t, redisSrv)
	require.Eventually(t, func() bool {
		n, err := raw.Exists(context.Background(), lock).Result()
		return err == nil && n == 0
	}, 5*time.Second, 5*time.Millisecond, msg)
}
