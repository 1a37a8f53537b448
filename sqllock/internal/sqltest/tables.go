package sqltest

import (
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/stretchr/testify/require"
)

// testBadTableNames: the constructor rejects a table name that is not an
// identifier with ErrInvalid, before sending anything to the database; and a nil
// database handle.
func (e Env) testBadTableNames(t *testing.T) {
	e.Exec(t, `CREATE TABLE IF NOT EXISTS victim (v INTEGER)`)
	for _, table := range []string{"locks; DROP TABLE victim", "locks; DROP TABLE victim; --", `x" (a int); DROP TABLE victim; --`} {
		_, err := e.Constructor(t)(&sqllock.Options{Table: table})
		requireOpError(t, err, e.Backend, "New", "", distlock.ErrInvalid)
		require.Contains(t, err.Error(), strconv.Quote(table))
	}
	e.Exec(t, `SELECT v FROM victim`) // still there
	requireOpError(t, e.NilHandle(OpCtx(t)), e.Backend, "New", "", distlock.ErrInvalid)
}

// testTableNames: quoted, case-sensitive and schema-qualified names work, and
// Lockers on different tables do not see each other's leases.
func (e Env) testTableNames(t *testing.T) {
	tables := []string{"select", "Mixed_Case", e.Schema + ".qualified"}
	key := Key("same")
	ls := make([]Locker, len(tables))
	leases := make([]distlock.Lease, len(tables))
	for i, table := range tables {
		ls[i] = e.New(t, &sqllock.Options{Table: table})
		require.Equal(t, table, ls[i].Table())
		var err error
		leases[i], err = ls[i].TryLock(OpCtx(t), key, time.Minute)
		require.NoError(t, err, "table %q", table)
	}
	// The same key in the same table is still exclusive.
	l := e.New(t, &sqllock.Options{Table: tables[2]})
	_, err := l.TryLock(OpCtx(t), key, time.Minute)
	require.ErrorIs(t, err, distlock.ErrLocked)
	for i, l := range ls {
		require.NoError(t, l.Unlock(OpCtx(t), leases[i]), "table %q", tables[i])
	}
}

// testKeyBytes: keys are opaque bytes: NUL, invalid UTF-8, quotes, prefixes, case
// and the longest key are distinct locks; a key over MaxKeyLen is invalid.
func (e Env) testKeyBytes(t *testing.T) {
	keys := []string{
		"a", "A", "a\x00", "a\x00b", "\x00", "\xff\xfe", "a'b", `a"b`, "a`b", "a\\b",
		"a; DROP TABLE keybytes", "a/b", "a b", "ключ", strings.Repeat("k", 1000),
		strings.Repeat("k", 1001), strings.Repeat("\x00", 64),
	}
	a, b := e.New(t, &sqllock.Options{Table: "keybytes"}), e.New(t, &sqllock.Options{Table: "keybytes"})
	var leases []distlock.Lease
	for _, k := range keys {
		k := k + driver.NewToken()[:4] // fresh per run, still containing the bytes
		lease, err := a.TryLock(OpCtx(t), k, time.Minute)
		require.NoError(t, err, "TryLock(%q): a distinct key must be free", k)
		require.Equal(t, k, lease.Key)
		require.Positive(t, lease.Fence)
		_, err = b.TryLock(OpCtx(t), k, time.Minute)
		require.ErrorIs(t, err, distlock.ErrLocked, "second TryLock(%q)", k)
		h, err := b.Inspect(OpCtx(t), k)
		require.NoError(t, err)
		require.Equal(t, k, h.Key)
		require.Equal(t, lease.Fence, h.Fence)
		leases = append(leases, lease)
	}
	for _, lease := range leases {
		_, err := a.Renew(OpCtx(t), lease, time.Minute)
		require.NoError(t, err, "Renew(%q)", lease.Key)
		require.NoError(t, a.Unlock(OpCtx(t), lease), "Unlock(%q)", lease.Key)
	}
	long := strings.Repeat("\x00", sqllock.MaxKeyLen-8) + driver.NewToken()[:8]
	lease, err := a.TryLock(OpCtx(t), long, time.Minute)
	require.NoError(t, err, "TryLock of a %d-byte key", len(long))
	require.NoError(t, a.Unlock(OpCtx(t), lease))
	_, err = a.TryLock(OpCtx(t), long+"x", time.Minute)
	requireOpError(t, err, e.Backend, "TryLock", long+"x", distlock.ErrInvalid)
}

// testHashCollision: a row whose key_hash matches but whose key differs (what a
// SHA-256 collision would give) is never taken over, renewed or released by the
// other key.
func (e Env) testHashCollision(t *testing.T) {
	l := e.New(t, &sqllock.Options{Table: "collision"})
	key := Key("collide")
	kh := sha256.Sum256([]byte(key))
	e.Exec(t, e.InsertExpired("collision"), kh[:], []byte("other"), []byte("tok"), 7)
	_, err := l.TryLock(OpCtx(t), key, time.Minute)
	require.Error(t, err, "TryLock took over a row that belongs to another key with the same hash")
	_, err = l.Renew(OpCtx(t), distlock.Lease{Key: key, Token: "tok", Fence: 7}, time.Minute)
	require.ErrorIs(t, err, distlock.ErrNotHeld, "Renew through a colliding row")
	require.ErrorIs(t, l.Unlock(OpCtx(t), distlock.Lease{Key: key, Token: "tok", Fence: 7}), distlock.ErrNotHeld)
	_, err = l.Inspect(OpCtx(t), key)
	require.ErrorIs(t, err, distlock.ErrNotHeld, "Inspect of a colliding row")
}

// testOwnerAndRowsKept: Inspect reports the owner label; Unlock keeps the row, so
// the next fence follows the last one.
func (e Env) testOwnerAndRowsKept(t *testing.T) {
	a := e.New(t, &sqllock.Options{Table: "owners", Owner: "host-a/42 ✓"})
	b := e.New(t, &sqllock.Options{Table: "owners"})
	require.Equal(t, "host-a/42 ✓", a.Owner())
	require.Equal(t, driver.DefaultOwner(), b.Owner())
	key := Key("owner")
	var last uint64
	for i := range 3 {
		lease, err := a.TryLock(OpCtx(t), key, time.Minute)
		require.NoError(t, err)
		require.Equal(t, last+1, lease.Fence, "acquisition %d", i)
		last = lease.Fence
		h, err := b.Inspect(OpCtx(t), key)
		require.NoError(t, err)
		require.Equal(t, "host-a/42 ✓", h.Owner)
		rem := time.Until(h.Expires)
		require.True(t, rem > 50*time.Second && rem <= time.Minute+time.Second, "Inspect Expires in %v for a 1m lease", rem)
		require.NoError(t, a.Unlock(OpCtx(t), lease))
		require.ErrorIs(t, a.Unlock(OpCtx(t), lease), distlock.ErrNotHeld, "second Unlock")
	}
}

// requireOpError checks that err is an *distlock.OpError of backend, op and key
// that wraps want.
func requireOpError(t *testing.T, err error, backend, op, key string, want error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var oe *distlock.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, backend, oe.Backend)
	require.Equal(t, op, oe.Op)
	require.Equal(t, key, oe.Key)
	require.LessOrEqual(t, len(err.Error()), 1000, "the message embeds a long key: %.200s...", err.Error())
}
