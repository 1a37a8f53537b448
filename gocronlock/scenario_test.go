package gocronlock_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/gocronlock"
	"github.com/distlock/distlock/internal/backendtest"
)

// ticks records which schedulers ran each tick t0 + k*period of a job.
type ticks struct {
	t0     time.Time
	period time.Duration

	mu   sync.Mutex
	runs map[int][]int // tick -> the schedulers that ran it
}

func newTicks(t0 time.Time, period time.Duration) *ticks {
	return &ticks{t0: t0, period: period, runs: make(map[int][]int)}
}

// record notes a run that scheduler who started at now on its own clock.
func (tk *ticks) record(now time.Time, who int) {
	k := int(math.Round(float64(now.Sub(tk.t0)) / float64(tk.period)))
	tk.mu.Lock()
	tk.runs[k] = append(tk.runs[k], who)
	tk.mu.Unlock()
}

// last returns the latest tick run, or -1.
func (tk *ticks) last() int {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	last := -1
	for k := range tk.runs {
		last = max(last, k)
	}
	return last
}

// snapshot returns a copy of the runs.
func (tk *ticks) snapshot() map[int][]int {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	m := make(map[int][]int, len(tk.runs))
	for k, v := range tk.runs {
		m[k] = slices.Clone(v)
	}
	return m
}

// TestOncePerTick is the seed scenario: three schedulers run the same job every
// 500ms through a Locker each, their clocks 0, 50ms and 120ms behind (so they fire
// each tick that much apart); every tick runs exactly once, because MinHold (250ms)
// keeps the key from the late schedulers after the short job returns.
func TestOncePerTick(t *testing.T) {
	backendtest.Run(t, backends, func(t *testing.T, b backendtest.Backend) {
		const period = 500 * time.Millisecond
		name := testKey(t)
		t0 := time.Now().Add(time.Second)
		tk := newTicks(t0, period)
		var scheds []gocron.Scheduler
		for i, behind := range []time.Duration{0, 50 * time.Millisecond, 120 * time.Millisecond} {
			c := b.NewClient(t, fmt.Sprintf("s%d", i))
			lk, err := gocronlock.NewLocker(c.Locker, &gocronlock.Options{TTL: b.TTL, MinHold: 250 * time.Millisecond, ReleaseTimeout: time.Second})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, lk.Close()) })
			s := newScheduler(t, behind, gocron.WithDistributedLocker(lk))
			clock := skewedClock{behind: behind}
			_, err = s.NewJob(gocron.DurationJob(period),
				gocron.NewTask(func(ctx context.Context) error {
					now := time.Now().Add(-clock.behind)
					ctx = lk.Context(ctx, name)
					tk.record(now, i)
					t := time.NewTimer(10 * time.Millisecond) // the job's work
					defer t.Stop()
					select {
					case <-t.C:
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				}),
				gocron.WithName(name), gocron.WithStartAt(gocron.WithStartDateTime(t0)))
			require.NoError(t, err)
			scheds = append(scheds, s)
		}
		for _, s := range scheds {
			s.Start()
		}
		const n = 6
		require.Eventually(t, func() bool { return tk.last() >= n-1 }, n*period+10*time.Second, 10*time.Millisecond,
			"%d ticks did not run", n)
		for _, s := range scheds {
			require.NoError(t, s.StopJobs())
		}
		runs := tk.snapshot()
		t.Logf("runs per tick (tick: schedulers): %v", runs)
		for k := 0; k < n; k++ {
			require.Len(t, runs[k], 1, "tick %d ran on schedulers %v; want exactly one", k, runs[k])
		}
	})
}

// TestLostLeaseIsTold: the scheduler that runs a long job crashes (its backend
// client is cut off); the job learns through Locker.Context that its lease was
// lost (cause wrapping distlock.ErrNotHeld), OnLost is called, and another
// scheduler runs the job once the server has freed the key.
func TestLostLeaseIsTold(t *testing.T) {
	backendtest.Run(t, backends, func(t *testing.T, b backendtest.Backend) {
		name := testKey(t)
		started := make(chan int, 16) // the scheduler whose job started
		ended := make(chan error, 16) // the cause of a job's end
		lost := make(chan [2]any, 16) // OnLost's arguments
		quit := make(chan struct{})   // ends the jobs still running when the test ends
		clients := make([]backendtest.Client, 3)
		for i := range clients {
			clients[i] = b.NewClient(t, fmt.Sprintf("s%d", i))
			lk, err := gocronlock.NewLocker(clients[i].Locker, &gocronlock.Options{
				TTL: b.TTL, MinHold: time.Nanosecond, ReleaseTimeout: time.Second,
				OnLost: func(key string, err error) { lost <- [2]any{key, err} },
			})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, lk.Close()) })
			s := newScheduler(t, 0, gocron.WithDistributedLocker(lk))
			_, err = s.NewJob(gocron.DurationJob(200*time.Millisecond),
				gocron.NewTask(func(ctx context.Context) {
					ctx = lk.Context(ctx, name)
					started <- i
					select {
					case <-ctx.Done():
						ended <- context.Cause(ctx)
					case <-quit:
					}
				}),
				gocron.WithName(name))
			require.NoError(t, err)
			s.Start()
		}
		t.Cleanup(func() { close(quit) }) // before the schedulers' Shutdown

		var first int
		select {
		case first = <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("no scheduler ran the job within 10s")
		}
		crashed := time.Now()
		clients[first].Crash()
		select {
		case err := <-ended:
			t.Logf("the job learnt of the loss after %v (ttl %v)", time.Since(crashed), b.TTL)
			require.ErrorIs(t, err, distlock.ErrNotHeld)
		case <-time.After(b.TTL + 2*time.Second):
			t.Fatalf("the job was not told of its lost lease within ttl + 2s")
		}
		select {
		case l := <-lost:
			require.Equal(t, name, l[0])
			require.ErrorIs(t, l[1].(error), distlock.ErrNotHeld)
		case <-time.After(time.Second):
			t.Fatal("OnLost was not called")
		}
		select {
		case next := <-started:
			require.NotEqual(t, first, next, "the crashed scheduler ran the job again")
			t.Logf("another scheduler took the job over %v after the crash (bound %v)", time.Since(crashed), b.Freed)
		case <-time.After(b.Freed + 2*time.Second):
			t.Fatalf("no other scheduler ran the job within %v of the crash", b.Freed+2*time.Second)
		}
	})
}

// TestElectorOncePerTick: three schedulers with an Elector each run the same job
// every 300ms; only the leader's runs it, so every tick runs once; when the
// leader crashes, another scheduler leads and runs the later ticks, and no tick
// ever runs twice.
func TestElectorOncePerTick(t *testing.T) {
	backendtest.Run(t, backends, func(t *testing.T, b backendtest.Backend) {
		const period = 300 * time.Millisecond
		name := testKey(t)
		t0 := time.Now().Add(time.Second)
		tk := newTicks(t0, period)
		var (
			scheds   []gocron.Scheduler
			electors []*gocronlock.Elector
			clients  []backendtest.Client
		)
		for i := range 3 {
			c := b.NewClient(t, fmt.Sprintf("s%d", i))
			el, err := gocronlock.NewElector(c.Locker, name, &election.Options{TTL: b.TTL})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, el.Close()) })
			s := newScheduler(t, 0, gocron.WithDistributedElector(el))
			_, err = s.NewJob(gocron.DurationJob(period),
				gocron.NewTask(func(ctx context.Context) { tk.record(time.Now(), i) }),
				gocron.WithName(name), gocron.WithStartAt(gocron.WithStartDateTime(t0)))
			require.NoError(t, err)
			scheds, electors, clients = append(scheds, s), append(electors, el), append(clients, c)
		}
		for _, s := range scheds {
			s.Start()
		}
		require.Eventually(t, func() bool { return tk.last() >= 3 }, 10*time.Second, 10*time.Millisecond, "4 ticks did not run")
		leader := -1
		for i, el := range electors {
			if el.IsLeader(t.Context()) == nil {
				require.Equal(t, -1, leader, "two electors lead at once")
				leader = i
			}
		}
		require.NotEqual(t, -1, leader, "no elector leads")
		crashTick := tk.last()
		clients[leader].Crash()
		require.Eventually(t, func() bool {
			runs := tk.snapshot()
			for k := crashTick + 1; k <= tk.last(); k++ {
				if len(runs[k]) > 0 && runs[k][0] != leader {
					return true
				}
			}
			return false
		}, b.Freed+5*time.Second, 10*time.Millisecond, "no other scheduler ran a tick after the leader crashed")
		for _, s := range scheds {
			require.NoError(t, s.StopJobs())
		}
		runs := tk.snapshot()
		t.Logf("runs per tick (tick: schedulers), leader s%d crashed after tick %d: %v", leader, crashTick, runs)
		for k, who := range runs {
			require.LessOrEqual(t, len(who), 1, "tick %d ran on schedulers %v", k, who)
		}
		for k := 0; k <= crashTick; k++ {
			require.Len(t, runs[k], 1, "tick %d, before the crash, ran on schedulers %v; want exactly one", k, runs[k])
		}
	})
}
