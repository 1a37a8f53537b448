package distlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

func TestOpError(t *testing.T) {
	err := error(&distlock.OpError{Backend: "redislock", Op: "TryLock", Key: "jobs/nightly", Err: distlock.ErrLocked})
	require.Equal(t, `redislock: TryLock "jobs/nightly": distlock: key is locked by another owner`, err.Error())
	require.ErrorIs(t, err, distlock.ErrLocked)
	var oe *distlock.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "jobs/nightly", oe.Key)

	noKey := &distlock.OpError{Backend: "zklock", Op: "New", Err: errors.New("no session")}
	require.Equal(t, "zklock: New: no session", noKey.Error())
}

func TestOpErrorShortensLongKeys(t *testing.T) {
	key := strings.Repeat("k", 1<<16)
	msg := (&distlock.OpError{Backend: "b", Op: "TryLock", Key: key, Err: distlock.ErrInvalid}).Error()
	require.Less(t, len(msg), 200)
	require.Contains(t, msg, "...(65536 bytes)")
}

func TestQuoteKey(t *testing.T) {
	require.Equal(t, `"a\x00b"`, driver.QuoteKey("a\x00b"))
	// A cut never splits a character: 63 ASCII bytes, then a 3-byte rune.
	key := strings.Repeat("a", 63) + "€" + "tail"
	q := driver.QuoteKey(key)
	require.True(t, strings.HasPrefix(q, `"`+strings.Repeat("a", 63)+`"...(`), q)
	require.Equal(t, driver.QuoteKey("€"), `"€"`)
}
