package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/redlock"
)

// TestOneAttemptPerKey: 200 TryLocks of one key started together through one
// Locker run a few rounds on the masters, not 200: exactly one acquires the key,
// every other returns ErrLocked (none a timeout), whether the key was free or
// held by another Locker.
func TestOneAttemptPerKey(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(map[bool]string{false: "free", true: "held"}[held], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := "flight-" + driver.NewToken()[:8]
			if held {
				_, err := newLocker(t, nil).TryLock(ctx, key, time.Minute)
				require.NoError(t, err)
			}
			l := newLocker(t, &redlock.Options{NodeTimeout: 2 * time.Second})
			count := l.CountAcquires()
			const n = 200
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					_, errs[i] = l.TryLock(ctx, key, time.Minute)
				})
			}
			close(start)
			wg.Wait()
			won := 0
			for _, err := range errs {
				if err == nil {
					won++
					continue
				}
				require.ErrorIs(t, err, distlock.ErrLocked)
			}
			require.Equal(t, map[bool]int{false: 1, true: 0}[held], won, "acquisitions")
			require.LessOrEqual(t, count(), int64(n/10), "rounds on a master for %d TryLocks of one key", n)
		})
	}
}
