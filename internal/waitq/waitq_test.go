package waitq

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isWoken reports whether w has been woken, once every goroutine of the bubble is
// blocked.
func isWoken(w *Waiter) bool {
	synctest.Wait()
	select {
	case <-w.Woken():
		return true
	default:
		return false
	}
}

// lineCount returns the number of lines q keeps.
func lineCount(q *Queue) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lines)
}

func woken(ws ...*Waiter) []bool {
	out := make([]bool, len(ws))
	for i, w := range ws {
		out[i] = isWoken(w)
	}
	return out
}

func TestReleaseWakesTheFirstWaiterOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(0)
		a, b, c := q.Join("k"), q.Join("k"), q.Join("k")
		other := q.Join("other")
		q.Released("k")
		assert.Equal(t, []bool{true, false, false, false}, woken(a, b, c, other))
		assert.Equal(t, 2, q.Len("k"))
		q.Attempt("k") // a's TryLock starts: the handoff is taken
		time.Sleep(10 * DefaultHandoff)
		assert.Equal(t, []bool{false, false}, woken(b, c), "nobody else wakes while a tries")
		q.Released("k")
		assert.Equal(t, []bool{true, false}, woken(b, c), "first come, first woken")
		for _, w := range []*Waiter{a, b, c, other} {
			w.Leave()
		}
		q.Attempt("k")
		assert.Zero(t, lineCount(q), "lines are forgotten once empty")
	})
}

func TestHandoffPassesOnWhenTheWokenCallerDoesNotTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(5 * time.Millisecond)
		a, b, c := q.Join("k"), q.Join("k"), q.Join("k")
		q.Released("k")
		require.True(t, isWoken(a))
		a.Leave() // its caller gave up without a TryLock
		time.Sleep(4 * time.Millisecond)
		assert.False(t, isWoken(b), "b waits for a's handoff time")
		time.Sleep(2 * time.Millisecond)
		assert.True(t, isWoken(b))
		assert.False(t, isWoken(c))
		time.Sleep(5 * time.Millisecond)
		assert.True(t, isWoken(c), "and so on down the line")
		time.Sleep(time.Second)
		assert.Zero(t, lineCount(q), "an expired handoff with no waiters left is forgotten")
	})
}

func TestAttemptFailedWakesTheNextAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(time.Hour)
		a, b := q.Join("k"), q.Join("k")
		q.Released("k")
		require.True(t, isWoken(a))
		q.Attempt("k")
		q.AttemptFailed("k")
		assert.True(t, isWoken(b))
	})
}

func TestAStaleHandoffTimerDoesNotWakeAnyone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(10 * time.Millisecond)
		a, b, c := q.Join("k"), q.Join("k"), q.Join("k")
		q.Released("k")
		require.True(t, isWoken(a))
		time.Sleep(8 * time.Millisecond)
		q.Released("k") // a new handoff, to b: its own 10ms
		require.True(t, isWoken(b))
		time.Sleep(8 * time.Millisecond)
		assert.False(t, isWoken(c), "the first handoff's timer is stale")
		time.Sleep(3 * time.Millisecond)
		assert.True(t, isWoken(c))
	})
}

func TestWakeAllAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(0)
		a, b := q.Join("k"), q.Join("k")
		c := q.Join("j")
		q.WakeAll("k")
		assert.Equal(t, []bool{true, true, false}, woken(a, b, c))
		q.Close()
		assert.True(t, isWoken(c))
		d := q.Join("k")
		assert.True(t, isWoken(d), "Join after Close is woken at once")
		d.Leave()
		q.Released("k") // no effect, no panic
		q.Attempt("k")
	})
}

func TestLeaveBeforeWakeAndReleaseWithoutWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(0)
		q.Released("k") // nobody waits: nothing happens, and nothing is kept
		assert.Zero(t, lineCount(q))
		a, b := q.Join("k"), q.Join("k")
		a.Leave()
		a.Leave() // idempotent
		q.Released("k")
		assert.True(t, isWoken(b), "a left: b is first")
		b.Leave()
		q.Attempt("k")
		assert.Zero(t, lineCount(q))
	})
}
