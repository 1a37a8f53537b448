package memlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/waitq"
	"github.com/distlock/distlock/memlock"
)

// A release wakes one Wait, not the herd; the next wakes when the woken caller does
// not try the key within the handoff time, or at the next release.
func TestReleaseWakesOneWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := memlock.New()
		defer l.Close()
		lease, err := l.TryLock(ctx, "k", time.Minute)
		require.NoError(t, err)
		const n = 50
		woke := make(chan int, n)
		for i := range n {
			go func() {
				if l.Wait(ctx, "k") == nil {
					woke <- i
				}
			}()
			synctest.Wait() // in line in the order they started
		}
		require.NoError(t, l.Unlock(ctx, lease))
		synctest.Wait()
		require.Len(t, woke, 1, "one release, one waiter woken")
		require.Equal(t, 0, <-woke, "the first to wait")

		// The woken caller takes the key: nobody else wakes, however long it holds.
		lease, err = l.TryLock(ctx, "k", time.Minute)
		require.NoError(t, err)
		time.Sleep(10 * waitq.DefaultHandoff)
		assert.Empty(t, woke)

		// Released and not taken (the woken caller gave up): the next waiter wakes
		// after the handoff time, not before.
		require.NoError(t, l.Unlock(ctx, lease))
		synctest.Wait()
		require.Equal(t, 1, <-woke)
		time.Sleep(waitq.DefaultHandoff - time.Millisecond)
		assert.Empty(t, woke)
		time.Sleep(2 * time.Millisecond)
		assert.Equal(t, 2, <-woke)

		// Close wakes the rest, with ErrClosed.
		require.NoError(t, l.Close())
		synctest.Wait()
		assert.Empty(t, woke)
		_, err = l.TryLock(ctx, "k", time.Minute)
		assert.ErrorIs(t, err, distlock.ErrClosed)
	})
}
