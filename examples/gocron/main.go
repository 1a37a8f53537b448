// Command gocron runs one gocron job on three schedulers whose clocks differ a
// little (their schedules start 0, 40ms and 100ms apart), through gocronlock: every
// tick runs exactly once across them. MinHold keeps the key for part of the period
// after the short job returns, so the late schedulers find the tick taken.
//
//	go run ./examples/gocron                       # memlock: runs anywhere
//	go run ./examples/gocron -redis 127.0.0.1:6379 # a Redis client per scheduler
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/gocronlock"
	"github.com/distlock/distlock/memlock"
	"github.com/distlock/distlock/redislock"
)

func main() {
	ticks := flag.Int("ticks", 5, "how many ticks to run")
	period := flag.Duration("period", 500*time.Millisecond, "the job's period")
	addr := flag.String("redis", "", "Redis `host:port` (default: memlock, in-process)")
	flag.Parse()
	newLocker := memlockLockers()
	if *addr != "" {
		newLocker = redisLockers(*addr)
	}
	ran, err := run(newLocker, []time.Duration{0, 40 * time.Millisecond, 100 * time.Millisecond}, *ticks, *period, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocron:", err)
		os.Exit(1)
	}
	for tick, n := range ran {
		if n != 1 {
			fmt.Fprintf(os.Stderr, "gocron: tick %d ran %d times\n", tick, n)
			os.Exit(1)
		}
	}
	fmt.Printf("every one of %d ticks ran exactly once across 3 schedulers\n", *ticks)
}

// memlockLockers returns Lockers that share one memlock.
func memlockLockers() func() (distlock.Locker, func(), error) {
	m := memlock.New()
	return func() (distlock.Locker, func(), error) { return m, func() {}, nil }
}

// redisLockers returns Lockers on a Redis client each, as schedulers on different
// machines would have.
func redisLockers(addr string) func() (distlock.Locker, func(), error) {
	return func() (distlock.Locker, func(), error) {
		client := redis.NewClient(&redis.Options{Addr: addr})
		l, err := redislock.New(client, nil)
		if err != nil {
			client.Close()
			return nil, nil, err
		}
		return l, func() { l.Close(); client.Close() }, nil
	}
}

// run starts a scheduler per entry of lateness, each with its own gocronlock
// Locker from newLocker and a job every period whose schedule starts that much
// late, and returns how often each of the first ticks ran.
func run(newLocker func() (distlock.Locker, func(), error), lateness []time.Duration, ticks int, period time.Duration, out io.Writer) ([]int, error) {
	name := "report-" + driver.NewToken()[:8] // the job's name is the lock's key
	t0 := time.Now().Add(time.Second)
	var (
		mu  sync.Mutex
		ran = make([]int, ticks)
	)
	var stops []func() // run in reverse: each scheduler, then its Locker, then its backend
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		stops = nil
	}
	defer stopAll()
	for i, late := range lateness {
		l, closeLocker, err := newLocker()
		if err != nil {
			return nil, err
		}
		stops = append(stops, closeLocker)
		lk, err := gocronlock.NewLocker(l, &gocronlock.Options{TTL: 10 * period, MinHold: period / 2})
		if err != nil {
			return nil, err
		}
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(lk))
		if err != nil {
			return nil, err
		}
		stops = append(stops, func() { lk.Close() }, func() { s.Shutdown() })
		start := t0.Add(late)
		_, err = s.NewJob(gocron.DurationJob(period),
			gocron.NewTask(func(ctx context.Context) error {
				tick := int(math.Round(float64(time.Since(start)) / float64(period)))
				ctx = lk.Context(ctx, name) // ends if the lease is lost
				lease, _ := lk.Lease(name)
				if tick < ticks {
					mu.Lock()
					ran[tick]++
					mu.Unlock()
					fmt.Fprintf(out, "tick %d: scheduler %d ran the job (fence %d)\n", tick, i, lease.Fence)
				}
				return ctx.Err()
			}),
			gocron.WithName(name), gocron.WithStartAt(gocron.WithStartDateTime(start)))
		if err != nil {
			return nil, err
		}
		s.Start()
	}
	// Let the last tick fire on every scheduler, then stop them all.
	time.Sleep(time.Until(t0.Add(time.Duration(ticks-1)*period + 3*period/4)))
	stopAll()
	return ran, nil
}
