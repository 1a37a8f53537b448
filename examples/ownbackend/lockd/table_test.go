package lockd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock returns a table whose clock moves only when the test calls the returned
// advance.
func fakeClock() (*table, func(time.Duration)) {
	t := newTable()
	now := time.Now()
	t.now = func() time.Time { return now }
	return t, func(d time.Duration) { now = now.Add(d) }
}

func TestTableExpiryAndFences(t *testing.T) {
	tab, advance := fakeClock()
	f1, err := tab.lock("k", "a", time.Second)
	require.NoError(t, err)
	_, err = tab.lock("k", "b", time.Second)
	require.ErrorIs(t, err, errLocked)
	advance(999 * time.Millisecond)
	_, err = tab.lock("k", "b", time.Second)
	require.ErrorIs(t, err, errLocked, "taken before its holder's ttl ran out")
	advance(time.Millisecond)
	f2, err := tab.lock("k", "b", time.Second)
	require.NoError(t, err, "not free once its holder's ttl ran out")
	require.Greater(t, f2, f1)
	require.ErrorIs(t, tab.renew("k", "a", time.Second), errNotHeld, "the expired holder renewed")
	require.ErrorIs(t, tab.unlock("k", "a"), errNotHeld, "the expired holder unlocked the next one's key")
	require.NoError(t, tab.unlock("k", "b"))
	f3, err := tab.lock("k", "a", time.Second)
	require.NoError(t, err)
	require.Greater(t, f3, f2)
}

func TestTableRenewNeverShortens(t *testing.T) {
	tab, advance := fakeClock()
	_, err := tab.lock("k", "a", time.Minute)
	require.NoError(t, err)
	require.NoError(t, tab.renew("k", "a", time.Second))
	advance(59 * time.Second)
	_, err = tab.lock("k", "b", time.Second)
	require.ErrorIs(t, err, errLocked, "a Renew with a shorter ttl cut the hold")
	require.NoError(t, tab.renew("k", "a", time.Minute)) // a longer one extends it
	advance(59 * time.Second)
	_, err = tab.lock("k", "b", time.Second)
	require.ErrorIs(t, err, errLocked, "a Renew with a longer ttl did not extend the hold")
}

func TestTableCancel(t *testing.T) {
	tab, advance := fakeClock()
	// After the LOCK: CANCEL releases the key.
	_, err := tab.lock("k", "a", time.Minute)
	require.NoError(t, err)
	tab.cancel("k", "a", time.Minute)
	_, _, err = tab.inspect("k")
	require.ErrorIs(t, err, errNotHeld, "CANCEL after the LOCK left the key held")
	// Before the LOCK: the LOCK is refused for the ttl, then the token is forgotten.
	tab.cancel("j", "b", time.Second)
	_, err = tab.lock("j", "b", time.Second)
	require.ErrorIs(t, err, errCancelled)
	advance(time.Second)
	_, err = tab.lock("j", "b", time.Second)
	require.NoError(t, err, "a cancelled token is refused past the ttl of its LOCK")
	require.Empty(t, tab.keys["j"].cancelled)
}
