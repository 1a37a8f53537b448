// Command cron shows the scheduled-task scenario: three instances of one service fire
// the same schedule, each a little apart (clock skew, start-up jitter), and every tick
// runs exactly once across them. MinHold keeps the key for part of the period, so an
// instance whose timer fires late cannot run a tick that another already ran.
//
// It uses memlock, so it runs anywhere; swap in any other backend's constructor.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

func main() {
	ticks := flag.Int("ticks", 5, "how many ticks to run")
	period := flag.Duration("period", 200*time.Millisecond, "the schedule's period")
	flag.Parse()
	ran, err := run(context.Background(), memlock.New(), 3, *ticks, *period, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cron:", err)
		os.Exit(1)
	}
	for tick, n := range ran {
		if n != 1 {
			fmt.Fprintf(os.Stderr, "cron: tick %d ran %d times\n", tick, n)
			os.Exit(1)
		}
	}
	fmt.Printf("every one of %d ticks ran exactly once across 3 instances\n", *ticks)
}

// run starts instances that each fire every tick of the schedule with up to a
// tenth of the period of skew, and returns how often each tick's job ran.
func run(ctx context.Context, l distlock.Locker, instances, ticks int, period time.Duration, out interface{ Write([]byte) (int, error) }) ([]int, error) {
	var (
		mu   sync.Mutex
		ran  = make([]int, ticks)
		wg   sync.WaitGroup
		errs = make(chan error, instances*ticks)
	)
	start := time.Now()
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tick := range ticks {
				skew := time.Duration(rand.Int64N(int64(period / 10)))
				timer := time.NewTimer(time.Until(start.Add(time.Duration(tick)*period + skew)))
				<-timer.C
				key := "report" // one key for the job, shared by all instances
				err := distlock.Do(ctx, l, key, &distlock.DoOptions{TTL: period, MinHold: period / 2},
					func(ctx context.Context) error {
						mu.Lock()
						ran[tick]++
						mu.Unlock()
						fmt.Fprintf(out, "tick %d: instance %d ran the job\n", tick, i)
						return nil
					})
				if err != nil && !errors.Is(err, distlock.ErrLocked) {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return ran, errors.Join(func() (all []error) {
		for err := range errs {
			all = append(all, err)
		}
		return
	}()...)
}
