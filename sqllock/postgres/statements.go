package postgres

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5"
)

// highWater is the key_hash of the high-water row (sqllock.HighWaterHash) as an
// SQL expression that does not depend on standard_conforming_strings.
var highWater = "decode('" + strings.Repeat("00", len(sqllock.HighWaterHash)) + "', 'hex')"

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

func newStatements(table string) statements {
	t := sqllock.QuoteTable(table, '"')
	sum := sha256.Sum256([]byte(table))
	channel := "distlock_" + hex.EncodeToString(sum[:8])
	return statements{
		channel: channel,
		tableID: int32(binary.BigEndian.Uint32(sum[8:12])),
		listen:  "LISTEN " + pgx.Identifier{channel}.Sanitize(),
		create: []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	key_hash bytea PRIMARY KEY,
	lock_key bytea NOT NULL,
	token bytea NOT NULL,
	fence bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	owner text NOT NULL
)`},
		highWater: []string{`INSERT INTO ` + t + ` (key_hash, lock_key, token, fence, expires_at, owner)
VALUES (` + highWater + `, '', '', 0, 'epoch', '` + sqllock.HighWaterOwner + `')
ON CONFLICT (key_hash) DO NOTHING`},
		// CURRENT_TIMESTAMP (now()) is the start of the statement's transaction:
		// this statement alone, or the batch it is part of (batchsql.go), which
		// the server began after the callers' requests. acquire takes the key's row over when it has
		// expired, its fence + 1 (the common case, which touches no other row),
		// and returns that fence. When the row it finds (the latest version: READ
		// COMMITTED rechecks a row that a concurrent statement changed) has not
		// expired, its last condition (which runs after the cheaper ones, as in
		// release: only on the key's own row) marks the key held in a setting
		// local to the statement's transaction, valued $6 (the token: no other
		// statement's value, also in a batch, whose statements share the
		// transaction), and it returns 0; it returns -1 when it found no row
		// of the key, and then insert decides. Every node of a statement is set up
		// at each execution, run or not (callgrind, the server's instructions per
		// TryLock+Unlock): a second scan of the row that told a held key cost 8% of
		// them, the INSERT of insert, kept out of acquire, a fifth.
		acquire: `WITH u AS (
	UPDATE ` + t + ` SET token = $3, fence = fence + 1,
		expires_at = CURRENT_TIMESTAMP + $4::interval, owner = $5
	WHERE key_hash = $1 AND lock_key = $2
		AND (expires_at <= CURRENT_TIMESTAMP OR set_config('` + heldSetting + `', $6, true) IS NULL)
	RETURNING fence
)
SELECT COALESCE((SELECT fence FROM u), CASE current_setting('` + heldSetting + `', true) WHEN $6 THEN 0 ELSE -1 END)`,
		// insert is the whole acquire in one statement, u as in acquire. Only when
		// u took nothing and the statement's snapshot has no unexpired row of the
		// key (so that the key is not plainly held), i inserts a new row, whose
		// fence starts above the high-water mark, read under FOR KEY SHARE: Prune
		// takes FOR UPDATE on that row before it deletes, so an acquire either
		// finishes before Prune's transaction or reads the mark that it committed
		// (READ COMMITTED re-reads the locked row; stricter isolation fails with a
		// serialization error, which is retried). i is also the way back for a row
		// that Prune deleted while u waited for it; when another acquire took or
		// inserted the row meanwhile, i's ON CONFLICT DO NOTHING makes the
		// statement return nothing. (Locking the one high-water row in every
		// acquire serialized them all: 16 goroutines on distinct keys ran no
		// faster than one.)
		insert: `WITH u AS (
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
SELECT fence FROM u UNION ALL SELECT fence FROM i`,
		// GREATEST: a renewal never moves the expiry earlier (a shorter ttl whose
		// reply is lost must not cut the lease under its holder's old Expires).
		renew: `UPDATE ` + t + ` SET expires_at = GREATEST(expires_at, now() + $4::bigint * interval '1 microsecond')
WHERE key_hash = $1 AND lock_key = $2 AND token = $3 AND expires_at > now()`,
		// renew of many rows (no two with the same key_hash and token, so that each
		// row joins one element), returning the index of each renewed one.
		renewBatch: `UPDATE ` + t + ` AS t SET expires_at = GREATEST(t.expires_at, now() + v.us * interval '1 microsecond')
FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bigint[]) WITH ORDINALITY AS v(h, k, tok, us, i)
WHERE t.key_hash = v.h AND t.lock_key = v.k AND t.token = v.tok AND t.expires_at > now()
RETURNING v.i`,
		// The last condition runs pg_try_advisory_xact_lock, and pg_notify when it
		// fails, for the row that the statement releases (the conditions before it
		// come first: PostgreSQL orders a row's conditions by cost, keeping the
		// written order among equals; a stray evaluation only costs a spurious
		// notification); the lock is held until the statement commits. The
		// notification, whose payload encode(key_hash, 'hex') is payload(key), is
		// delivered when the statement commits. It notifies only when a Wait has
		// registered the key (register.go). (In RETURNING it cost 4% of the
		// server's instructions per TryLock+Unlock more: the returned row.)
		release: `UPDATE ` + t + ` SET expires_at = CURRENT_TIMESTAMP
WHERE key_hash = $1 AND lock_key = $2 AND token = $3 AND expires_at > CURRENT_TIMESTAMP
	AND (pg_try_advisory_xact_lock($4::int4, $5::int4) OR pg_notify('` + channel + `', encode($1, 'hex')) IS NOT NULL)`,
		inspect: `SELECT fence, owner, (EXTRACT(EPOCH FROM expires_at - now()) * 1000000)::bigint
FROM ` + t + ` WHERE key_hash = $1 AND lock_key = $2 AND expires_at > now()`,
		candidates: `SELECT key_hash FROM ` + t + `
WHERE key_hash > $1 AND expires_at < now() - $2::bigint * interval '1 microsecond'
ORDER BY key_hash LIMIT $3`,
		pruneLock: `SELECT fence FROM ` + t + ` WHERE key_hash = ` + highWater + ` FOR UPDATE`,
		prune: `WITH d AS (
	DELETE FROM ` + t + `
	WHERE key_hash > $1 AND key_hash <= $2 AND expires_at < now() - $3::bigint * interval '1 microsecond'
	RETURNING fence
)
UPDATE ` + t + ` SET fence = GREATEST(fence, (SELECT max(fence) FROM d))
WHERE key_hash = ` + highWater + `
RETURNING (SELECT count(*) FROM d)`,
	}
}

// ddl returns the statements that create the table and its high-water row.
func (s statements) ddl() []string { return append(append([]string(nil), s.create...), s.highWater...) }
