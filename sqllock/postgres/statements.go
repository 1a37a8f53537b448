package postgres

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/jackc/pgx/v5"
)

// highWater is the key_hash of the high-water row (sqldialect.HighWaterHash) as an
// SQL expression that does not depend on standard_conforming_strings.
var highWater = "decode('" + strings.Repeat("00", len(sqldialect.HighWaterHash)) + "', 'hex')"

// heldSetting is the setting in which acquire marks a key held: a placeholder
// (custom) setting, set for the statement's transaction only.
const heldSetting = "distlock.held"

// statements are the SQL of one table.
type statements struct {
	create, highWater                    []string // the DDL: CREATE TABLE; INSERT of the high-water row
	acquire, insert, renew, release      string
	inspect                              string
	renewBatch                           string
	candidates, pruneLock, prune, listen string
	channel                              string // of the release notifications
	tableID                              int32  // the first key of the advisory locks of Waits (register.go)
}

// newStatements returns the statements of table, by what they do: the DDL, the
// names that Waits and releases share, acquire, renew, release, and Prune.
func newStatements(table string) statements {
	t := sqldialect.QuoteTable(table, '"')
	s := statements{inspect: inspectSQL(t)}
	s.create, s.highWater = ddlSQL(t)
	s.channel, s.listen, s.tableID = waitNames(table)
	s.acquire, s.insert = acquireSQL(t)
	s.renew, s.renewBatch = renewSQL(t)
	s.release = releaseSQL(t, s.channel)
	s.candidates, s.pruneLock, s.prune = pruneSQL(t)
	return s
}

// ddl returns the statements that create the table and its high-water row.
func (s statements) ddl() []string { return append(append([]string(nil), s.create...), s.highWater...) }

// ddlSQL returns the CREATE TABLE of the table t (quoted) and the INSERT of its
// high-water row.
func ddlSQL(t string) (create, highWaterRow []string) {
	create = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	key_hash bytea PRIMARY KEY,
	lock_key bytea NOT NULL,
	token bytea NOT NULL,
	fence bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	owner text NOT NULL
)`}
	highWaterRow = []string{`INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
VALUES (` + highWater + `, '', '', 0, 'epoch', '` + sqldialect.HighWaterOwner + `')
ON CONFLICT (key_hash) DO NOTHING`}
	return create, highWaterRow
}

// waitNames returns what releases and Waits of table share: the channel of its
// release notifications, the statement that listens to it, and the first key of
// the advisory locks by which Waits register their keys. All derive from the
// table's name, so that every client of the table agrees on them.
func waitNames(table string) (channel, listen string, tableID int32) {
	sum := sha256.Sum256([]byte(table))
	channel = "distlock_" + hex.EncodeToString(sum[:8])
	return channel, "LISTEN " + pgx.Identifier{channel}.Sanitize(), int32(binary.BigEndian.Uint32(sum[8:12]))
}

// acquireSQL returns the statements of an acquire of a row of t.
//
// CURRENT_TIMESTAMP (now()) is the start of the statement's transaction: this
// statement alone, or the batch it is part of (batchsql.go), which the server
// began after the callers' requests. acquire takes the key's row over when it has
// expired, its fence + 1 (the common case, which touches no other row), and
// returns that fence. When the row it finds (the latest version: READ COMMITTED
// rechecks a row that a concurrent statement changed) has not expired, its last
// condition (which runs after the cheaper ones, as in release: only on the key's
// own row) marks the key held in a setting local to the statement's transaction,
// valued $6 (the token: no other statement's value, also in a batch, whose
// statements share the transaction), and it returns 0; it returns -1 when it found
// no row of the key, and then insert decides. The server sets up every node of a
// statement at each execution, run or not, so acquire holds neither a second scan
// of the row nor the INSERT: insert, run only for a key without a row, does.
//
// insert is the whole acquire in one statement, u as in acquire. Only when u took
// nothing and the statement's snapshot has no unexpired row of the key (so that
// the key is not plainly held), i inserts a new row, whose fence starts above the
// high-water mark, read under FOR KEY SHARE: Prune takes FOR UPDATE on that row
// before it deletes, so an acquire either finishes before Prune's transaction or
// reads the mark that it committed (READ COMMITTED re-reads the locked row;
// stricter isolation fails with a serialization error, which is retried). i is
// also the way back for a row that Prune deleted while u waited for it; when
// another acquire took or inserted the row meanwhile, i's ON CONFLICT DO NOTHING
// makes the statement return nothing. acquire never reads the high-water row, so
// that acquires of distinct keys do not all lock one row.
func acquireSQL(t string) (acquire, insert string) {
	acquire = `WITH u AS (
	UPDATE ` + t + ` SET token = $3, fence = fence + 1,
		expires_at = CURRENT_TIMESTAMP + $4::interval, owner = $5
	WHERE key_hash = $1 AND lock_key = $2
		AND (expires_at <= CURRENT_TIMESTAMP OR set_config('` + heldSetting + `', $6, true) IS NULL)
	RETURNING fence
)
SELECT COALESCE((SELECT fence FROM u), CASE current_setting('` + heldSetting + `', true) WHEN $6 THEN 0 ELSE -1 END)`
	insert = `WITH u AS (
	UPDATE ` + t + ` SET token = $3, fence = fence + 1,
		expires_at = now() + $4::bigint * interval '1 microsecond', owner = $5
	WHERE key_hash = $1 AND lock_key = $2 AND expires_at <= now()
	RETURNING fence
), i AS (
	INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
	SELECT $1, $2, $3,
		COALESCE((SELECT h.fence FROM ` + t + ` h WHERE h.key_hash = ` + highWater + ` FOR KEY SHARE), 0) + 1,
		now() + $4::bigint * interval '1 microsecond', $5
	WHERE NOT EXISTS (SELECT FROM u)
		AND NOT EXISTS (SELECT FROM ` + t + ` k WHERE k.key_hash = $1 AND k.expires_at > now())
	ON CONFLICT (key_hash) DO NOTHING
	RETURNING fence
)
SELECT fence FROM u UNION ALL SELECT fence FROM i`
	return acquire, insert
}

// renewSQL returns the renewal of one row of t, and of many (no two with the same
// key_hash and token, so that each row joins one element), which returns the
// index of each renewed one. GREATEST: a renewal never moves the expiry earlier (a
// shorter ttl whose reply is lost must not cut the lease under its holder's old
// Expires).
func renewSQL(t string) (renew, renewBatch string) {
	renew = `UPDATE ` + t + ` SET expires_at = GREATEST(expires_at, now() + $4::bigint * interval '1 microsecond')
WHERE key_hash = $1 AND lock_key = $2 AND token = $3 AND expires_at > now()`
	renewBatch = `UPDATE ` + t + ` AS t SET expires_at = GREATEST(t.expires_at, now() + v.us * interval '1 microsecond')
FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bigint[]) WITH ORDINALITY AS v(h, k, tok, us, i)
WHERE t.key_hash = v.h AND t.lock_key = v.k AND t.token = v.tok AND t.expires_at > now()
RETURNING v.i`
	return renew, renewBatch
}

// releaseSQL returns the release of a row of t, which notifies channel.
//
// The last condition runs pg_try_advisory_xact_lock, and pg_notify when it fails,
// for the row that the statement releases (the conditions before it come first:
// PostgreSQL orders a row's conditions by cost, keeping the written order among
// equals; a stray evaluation only costs a spurious notification); the lock is
// held until the statement commits. The notification, whose payload
// encode(key_hash, 'hex') is payload(key), is delivered when the statement
// commits. It notifies only when a Wait has registered the key (register.go). The
// statement returns no row.
func releaseSQL(t, channel string) string {
	return `UPDATE ` + t + ` SET expires_at = CURRENT_TIMESTAMP
WHERE key_hash = $1 AND lock_key = $2 AND token = $3 AND expires_at > CURRENT_TIMESTAMP
	AND (pg_try_advisory_xact_lock($4::int4, $5::int4) OR pg_notify('` + channel + `', encode($1, 'hex')) IS NOT NULL)`
}

// inspectSQL returns the read of a key's unexpired row of t: its fence, owner and
// the microseconds it has left.
func inspectSQL(t string) string {
	return `SELECT fence, owner, (EXTRACT(EPOCH FROM expires_at - now()) * 1000000)::bigint
FROM ` + t + ` WHERE key_hash = $1 AND lock_key = $2 AND expires_at > now()`
}

// pruneSQL returns Prune's statements on t: the rows to delete (by key_hash
// order), the lock of the high-water row, and the deletion, which raises the
// high-water mark to the highest fence it deleted in the same statement.
func pruneSQL(t string) (candidates, lock, prune string) {
	candidates = `SELECT key_hash FROM ` + t + `
WHERE key_hash > $1 AND expires_at < now() - $2::bigint * interval '1 microsecond'
ORDER BY key_hash LIMIT $3`
	lock = `SELECT fence FROM ` + t + ` WHERE key_hash = ` + highWater + ` FOR UPDATE`
	prune = `WITH d AS (
	DELETE FROM ` + t + `
	WHERE key_hash > $1 AND key_hash <= $2 AND expires_at < now() - $3::bigint * interval '1 microsecond'
	RETURNING fence
)
UPDATE ` + t + ` SET fence = GREATEST(fence, (SELECT max(fence) FROM d))
WHERE key_hash = ` + highWater + `
RETURNING (SELECT count(*) FROM d)`
	return candidates, lock, prune
}
