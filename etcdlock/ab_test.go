package etcdlock_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/stretchr/testify/require"
)

// BenchmarkAB measures each speed mechanism on and off, alternately (run with
// -count for pairs): W1's TryLock+Unlock pair on 1 and 16 goroutines, and
// renewals of 1,000 held leases by 64 goroutines (W5's renewals).
func BenchmarkAB(b *testing.B) {
	ctx := context.Background()
	endpoints := []string{etcdSrv.Addr()}
	mechs := []string{"direct", "deadline", "md", "spares", "ka", "batch", "held"}
	if m := os.Getenv("AB_MECHS"); m != "" {
		mechs = strings.Split(m, ",")
	}
	states := []string{"on", "off"}
	if os.Getenv("AB_ORDER") == "offon" {
		states = []string{"off", "on"}
	}
	for _, mech := range mechs {
		for _, state := range states {
			set := func() {
				if state == "off" {
					etcdlock.SetDisabled(mech)
				} else {
					etcdlock.SetDisabled()
				}
			}
			b.Run(fmt.Sprintf("%s/%s/w1g1", mech, state), func(b *testing.B) {
				set()
				defer etcdlock.SetDisabled()
				var c rttCounter
				l := newLocker(b, newClient(b, endpoints, &c), nil)
				key := "ab-" + driver.NewToken()
				runUncontended(b, &c, func() {
					lease, err := l.TryLock(ctx, key, benchTTL)
					require.NoError(b, err)
					require.NoError(b, l.Unlock(ctx, lease))
				})
			})
			b.Run(fmt.Sprintf("%s/%s/w1g16", mech, state), func(b *testing.B) {
				set()
				defer etcdlock.SetDisabled()
				var c rttCounter
				l := newLocker(b, newClient(b, endpoints, &c), nil)
				runParallel16(b, &c, func() func() {
					key := "ab-" + driver.NewToken()
					return func() {
						lease, err := l.TryLock(ctx, key, benchTTL)
						require.NoError(b, err)
						require.NoError(b, l.Unlock(ctx, lease))
					}
				})
			})
			b.Run(fmt.Sprintf("%s/%s/renew", mech, state), func(b *testing.B) {
				set()
				defer etcdlock.SetDisabled()
				benchRenewMany(b, endpoints)
			})
		}
	}
}

// benchRenewMany holds 1,000 leases and renews them, 64 at a time, b.N renewals
// in all.
func benchRenewMany(b *testing.B, endpoints []string) {
	const leases, workers, ttl = 1000, 64, 30 * time.Second
	if b.N == 1 {
		return // the framework's probe run: the setup would cost more than it
	}
	ctx := context.Background()
	var c rttCounter
	l := newLocker(b, newClient(b, endpoints, &c), nil)
	pfx := "ab-renew-" + driver.NewToken()
	held := make([]distlock.Lease, leases)
	for i := range held {
		var err error
		held[i], err = l.TryLock(ctx, fmt.Sprintf("%s-%d", pfx, i), ttl)
		require.NoError(b, err)
	}
	var mu sync.Mutex
	next := 0
	before := c.Load()
	b.ResetTimer()
	cpu := startCPU()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				if next >= b.N {
					mu.Unlock()
					return
				}
				i := next % leases
				next++
				lease := held[i]
				mu.Unlock()
				nl, err := l.Renew(ctx, lease, ttl)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				if nl.Expires.After(held[i].Expires) {
					held[i] = nl
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(c.Load()-before)/float64(b.N), "rtt/op")
	cpu.report(b, b.N)
}
