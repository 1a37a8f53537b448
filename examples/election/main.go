// Command election runs three candidates of one leader election in one process:
// each campaigns, leads for a while under its term (its lease's fence), resigns
// and rests, and a waiting candidate leads at once; an observer prints every
// change of leader.
//
//	go run ./examples/election                       # memlock: runs anywhere
//	go run ./examples/election -redis 127.0.0.1:6379 # a Redis client per candidate
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/memlock"
	"github.com/distlock/distlock/redislock"
)

// A newLocker returns a Locker for the candidate named owner, and its close.
type newLocker func(owner string) (distlock.Locker, func(), error)

func main() {
	terms := flag.Int("terms", 6, "how many terms to run")
	lead := flag.Duration("lead", 300*time.Millisecond, "how long each leader leads before it resigns")
	addr := flag.String("redis", "", "Redis `host:port` (default: memlock, in-process)")
	flag.Parse()
	lockers := memlockLockers()
	if *addr != "" {
		lockers = redisLockers(*addr)
	}
	if err := run(context.Background(), lockers, 3, *terms, *lead, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "election:", err)
		os.Exit(1)
	}
}

// memlockLockers returns Lockers that share one memlock.
func memlockLockers() newLocker {
	m := memlock.New()
	return func(string) (distlock.Locker, func(), error) { return m, func() {}, nil }
}

// redisLockers returns Lockers on a Redis client each, labelled with the
// candidate's name (which the observer sees).
func redisLockers(addr string) newLocker {
	return func(owner string) (distlock.Locker, func(), error) {
		client := redis.NewClient(&redis.Options{Addr: addr})
		l, err := redislock.New(client, &redislock.Options{Owner: owner})
		if err != nil {
			client.Close()
			return nil, nil, err
		}
		return l, func() { l.Close(); client.Close() }, nil
	}
}

// run lets n candidates, each on a Locker of its own, take turns at leading for
// lead each, until terms terms have passed; it prints what happens to out.
func run(ctx context.Context, lockers newLocker, n, terms int, lead time.Duration, out io.Writer) error {
	out = &lockedWriter{w: out} // the candidates and the observer print concurrently
	key := "example-leader-" + driver.NewToken()[:8]
	opts := &election.Options{TTL: 5 * time.Second, Poll: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		led atomic.Int64
		wg  sync.WaitGroup
	)
	defer wg.Wait()
	for i := range n {
		name := fmt.Sprintf("candidate-%d", i)
		l, closeLocker, err := lockers(name)
		if err != nil {
			return err
		}
		defer closeLocker() // after wg.Wait: deferred calls run last-in first-out
		e, err := election.New(l, key, opts)
		if err != nil {
			return err
		}
		if i == 0 {
			leaders, err := e.Observe(ctx)
			if err != nil {
				return err // not an Inspector
			}
			wg.Go(func() {
				for l := range leaders {
					if l.IsZero() {
						fmt.Fprintln(out, "observer: no leader")
					} else {
						fmt.Fprintf(out, "observer: %s leads in term %d\n", l.Owner, l.Term)
					}
				}
			})
		}
		wg.Go(func() {
			for {
				lead1, err := e.Campaign(ctx)
				if err != nil {
					return // ctx ended
				}
				fmt.Fprintf(out, "%s: I lead in term %d\n", name, lead1.Term())
				work(lead1.Context(), lead)
				if err := lead1.Resign(context.WithoutCancel(ctx)); err != nil {
					fmt.Fprintf(out, "%s: term %d ended: %v\n", name, lead1.Term(), err)
				}
				if led.Add(1) == int64(terms) {
					cancel()
				}
				work(ctx, lead) // rest, so that another candidate leads next
			}
		})
	}
	return nil
}

// work is the leader's work: it lasts d, or until ctx (the leadership's) ends.
func work(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// A lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
