package redlock_test

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/redlock"
)

// TestSpeedupsAB measures each speedup (speedups.go) against the Locker without
// it, interleaved (on, off, on, off, ...) in one process, on scaled-down versions
// of the matrix rows it could change; it logs each pair and the median ratio
// off/on. It runs only with REDLOCK_AB=1 (and REDLOCK_AB_ROUNDS pairs, default 3):
//
//	REDLOCK_AB=1 go test -count=1 -run TestSpeedupsAB -v ./redlock/
func TestSpeedupsAB(t *testing.T) {
	if os.Getenv("REDLOCK_AB") == "" {
		t.Skip("REDLOCK_AB is not set")
	}
	rounds := 3
	if n, err := time.ParseDuration(os.Getenv("REDLOCK_AB_ROUNDS") + "s"); err == nil {
		rounds = int(n / time.Second)
	}
	type row struct {
		name string
		run  func(t *testing.T, opts *redlock.Options) map[string]float64
	}
	rows := []row{
		{"flights/W1", abW1},
		{"flights/W2", abW2},
		{"flights/W4", abW4},
		{"turns/W2", abW2},
		{"turns/W4", abW4},
		{"sightings/W2", abW2},
		{"sightings/W4", abW4},
		{"retry/W2", abW2},
		{"retry/W4", abW4},
		{"renewbatch/W5", abW5},
	}
	off := map[string]*redlock.Options{
		"flights":    redlock.WithOff(nil, redlock.UseFlights),
		"turns":      redlock.WithOff(nil, redlock.UseTurns),
		"sightings":  redlock.WithOff(nil, redlock.UseSightings),
		"retry":      redlock.WithOff(nil, redlock.UseRetry),
		"renewbatch": redlock.WithOff(nil, redlock.UseRenewBatch),
	}
	only := os.Getenv("REDLOCK_AB_ONLY")
	nodeTimeout := 2 * time.Second // timeouts are not what this measures
	if d, err := time.ParseDuration(os.Getenv("REDLOCK_AB_NODETIMEOUT")); err == nil {
		nodeTimeout = d
	}
	for _, r := range rows {
		mech := r.name[:len(r.name)-3]
		if only != "" && only != mech && only != r.name {
			continue
		}
		ratios := map[string][]float64{}
		for i := range rounds {
			on := r.run(t, &redlock.Options{NodeTimeout: nodeTimeout})
			o := *off[mech]
			o.NodeTimeout = nodeTimeout
			without := r.run(t, &o)
			for k, v := range on {
				if v != 0 {
					ratios[k] = append(ratios[k], without[k]/v)
				}
				t.Logf("%s pair %d: %s on %.4g off %.4g", r.name, i, k, v, without[k])
			}
		}
		for k, rs := range ratios {
			s := append([]float64(nil), rs...)
			sort.Float64s(s)
			t.Logf("%s: %s off/on median %.3f (pairs %.3f .. %.3f, n=%d)", r.name, k, s[len(s)/2], s[0], s[len(s)-1], len(s))
		}
	}
}

// serverCommands returns the commands the five nodes have processed so far.
func serverCommands(t *testing.T) float64 {
	var n float64
	for _, c := range clients(t, nodeAddrs()) {
		info, err := c.Info(context.Background(), "stats").Result()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
				x, err := strconv.ParseFloat(v, 64)
				require.NoError(t, err)
				n += x
			}
		}
	}
	return n
}

// abW1: uncontended TryLock+Unlock by 1 goroutine: ops per second.
func abW1(t *testing.T, opts *redlock.Options) map[string]float64 {
	l := newLocker(t, opts)
	ctx := context.Background()
	key := "ab-w1-" + driver.NewToken()[:8]
	const n = 200
	start := time.Now()
	for range n {
		lease, err := l.TryLock(ctx, key, 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx, lease))
	}
	return map[string]float64{"ops/s": n / time.Since(start).Seconds()}
}

// abW2: 16 Lockers, one caller each, take turns on one key (distlock.Lock, hold
// 1ms, Unlock) for 2s: acquisitions per second and phase-1 rounds per acquisition.
func abW2(t *testing.T, opts *redlock.Options) map[string]float64 {
	const lockers = 16
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "ab-w2-" + driver.NewToken()[:8]
	var ls []*redlock.Locker
	var counts []func() int64
	for range lockers {
		l := newLocker(t, opts)
		ls = append(ls, l)
		counts = append(counts, l.CountAcquires())
	}
	var acquired atomic.Int64
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() {
			for time.Now().Before(stop) {
				lease, err := distlock.Lock(ctx, l, key, 10*time.Second, nil)
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				acquired.Add(1)
				time.Sleep(time.Millisecond)
				if err := l.Unlock(ctx, lease); err != nil {
					t.Errorf("Unlock: %v", err)
					return
				}
			}
		})
	}
	start, cmds := time.Now(), serverCommands(t)
	wg.Wait()
	var rounds int64
	for _, c := range counts {
		rounds += c()
	}
	n := float64(acquired.Load())
	return map[string]float64{"acq/s": n / time.Since(start).Seconds(), "rounds/acq": float64(rounds) / n,
		"requests/acq": (serverCommands(t) - cmds) / n}
}

// abW4: a herd of waiters on 4 Lockers (REDLOCK_AB_HERD each, default 50) waits on
// a held key; then every one takes it once: handoffs per second, rounds per
// handoff, and the calls of distlock.Lock that failed (errors), with each
// Locker's NodeTimeout from opts.
func abW4(t *testing.T, opts *redlock.Options) map[string]float64 {
	const lockers = 4
	perLocker := 50
	if n, err := strconv.Atoi(os.Getenv("REDLOCK_AB_HERD")); err == nil {
		perLocker = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	key := "ab-w4-" + driver.NewToken()[:8]
	holder := newLocker(t, &redlock.Options{NodeTimeout: 2 * time.Second})
	first, err := holder.TryLock(ctx, key, 30*time.Second)
	require.NoError(t, err)
	var (
		counts        []func() int64
		ls            []*redlock.Locker
		acquired, bad atomic.Int64
		wg            sync.WaitGroup
	)
	for range lockers {
		l := newLocker(t, opts)
		ls = append(ls, l)
		counts = append(counts, l.CountAcquires())
	}
	for _, l := range ls {
		for range perLocker {
			wg.Go(func() {
				for {
					lease, err := distlock.Lock(ctx, l, key, 30*time.Second, nil)
					if err != nil {
						if bad.Add(1); ctx.Err() != nil {
							return
						}
						continue
					}
					acquired.Add(1)
					time.Sleep(time.Millisecond)
					_ = l.Unlock(ctx, lease)
					return
				}
			})
		}
	}
	total := lockers * perLocker
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		n := 0
		for _, l := range ls {
			n += l.Waiting(key)
		}
		if n == total {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var before int64
	for _, c := range counts {
		before += c()
	}
	start, cmds := time.Now(), serverCommands(t)
	require.NoError(t, holder.Unlock(ctx, first))
	wg.Wait()
	var rounds int64
	for _, c := range counts {
		rounds += c()
	}
	n := float64(acquired.Load())
	return map[string]float64{"handoffs/s": n / time.Since(start).Seconds(), "rounds/handoff": float64(rounds-before) / n,
		"errors": float64(bad.Load()) + 1e-9, "requests/handoff": (serverCommands(t) - cmds) / n}
}

// abW5: one Locker holds 1000 leases and renews them all at once, 3 times: renewals
// per second of wall time.
func abW5(t *testing.T, opts *redlock.Options) map[string]float64 {
	leases := 1000
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	l := newLocker(t, opts)
	prefix := "ab-w5-" + driver.NewToken()[:8] + "-"
	held := make([]distlock.Lease, leases)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range held {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var err error
			for range 5 {
				if held[i], err = l.TryLock(ctx, prefix+driver.NewToken()[:6], 30*time.Second); err == nil {
					return
				}
			}
			t.Errorf("TryLock: %v", err)
		})
	}
	wg.Wait()
	var failed atomic.Int64
	start := time.Now()
	for range 3 {
		for i := range held {
			wg.Go(func() {
				next, err := l.Renew(ctx, held[i], 30*time.Second)
				if err != nil {
					failed.Add(1)
					return
				}
				held[i] = next
			})
		}
		wg.Wait()
	}
	rate := float64(3*leases) / time.Since(start).Seconds()
	for _, lease := range held {
		wg.Go(func() { _ = l.Unlock(ctx, lease) })
	}
	wg.Wait()
	return map[string]float64{"renewals/s": rate, "failed": float64(failed.Load()) + 1e-9}
}
