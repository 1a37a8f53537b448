package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"
)

var _ sqldialect.BatchRenewer = (*dialect)(nil)

// MySQL has no UPDATE ... RETURNING, so RenewBatch runs, in one transaction, an
// UPDATE of the batch's rows and a SELECT of the rows that it renewed, both
// measured against one reading of the clock, @distlock_now:
//
//   - the UPDATE sets each held row's expires_at to the later of its own and
//     @distlock_now + ttl (never earlier), where held means expires_at >
//     @distlock_now;
//   - the SELECT reports the rows of the batch whose token holds the key until at
//     least @distlock_now + ttl.
//
// A row that the UPDATE renewed qualifies, and stays locked by the transaction
// until the commit. A row that it did not renew had expired by @distlock_now
// (expires_at <= @distlock_now < @distlock_now + ttl) and cannot have been renewed
// since (a renewal needs an unexpired row; a takeover changes the token): it does
// not qualify. So each Renew's result is exact, as with the single statement, and
// the database's expiry is at least @distlock_now + ttl, @distlock_now being read
// after the Renew was called.
const (
	batchNow = `SET @distlock_now = UTC_TIMESTAMP(6)`
	// The %s are the table and batchWhere.
	batchRenew   = `UPDATE %s SET expires_at = GREATEST(expires_at, @distlock_now + INTERVAL ? MICROSECOND) WHERE %s AND expires_at > @distlock_now`
	batchRenewed = `SELECT key_hash, token FROM %s WHERE %s AND expires_at >= @distlock_now + INTERVAL ? MICROSECOND`
)

// batchWhere returns the condition that selects the rows of rs, by (key_hash,
// lock_key, token), and its arguments; the key_hash IN list lets the primary key
// find them.
func batchWhere(rs []sqldialect.Row) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 4*len(rs))
	b.WriteString("key_hash IN (")
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?")
		args = append(args, r.Hash)
	}
	b.WriteString(") AND (key_hash, lock_key, token) IN (")
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?)")
		args = append(args, r.Hash, r.Key, r.Token)
	}
	b.WriteString(")")
	return b.String(), args
}

// RenewBatch renews rs in one transaction of a few statements per distinct ttl
// (sqldialect.BatchRenewer); see batchNow.
func (d *dialect) RenewBatch(ctx context.Context, rs []sqldialect.Row, ttls []time.Duration) ([]bool, error) {
	byTTL := make(map[int64][]int) // microseconds -> indexes of rs
	var order []int64
	for i, ttl := range ttls {
		us := sqldialect.Micros(ttl)
		if byTTL[us] == nil {
			order = append(order, us)
		}
		byTTL[us] = append(byTTL[us], i)
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, batchNow); err != nil {
		return nil, err
	}
	held := make([]bool, len(rs))
	for _, us := range order {
		idx := byTTL[us]
		part := make([]sqldialect.Row, len(idx))
		for j, i := range idx {
			part[j] = rs[i]
		}
		if err := d.renewPart(ctx, tx, part, us, idx, held); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return held, nil
}

// renewPart renews part (rs[idx[j]] for every j) for us microseconds in tx and
// sets held[idx[j]] for the rows renewed.
func (d *dialect) renewPart(ctx context.Context, tx *sql.Tx, part []sqldialect.Row, us int64, idx []int, held []bool) error {
	where, args := batchWhere(part)
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(batchRenew, d.sql.table, where), append([]any{us}, args...)...); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(batchRenewed, d.sql.table, where), append(args, us)...)
	if err != nil {
		return err
	}
	at := make(map[string]int, len(part)) // hash (32 bytes) + token -> index in part
	for j, r := range part {
		at[string(r.Hash)+string(r.Token)] = j
	}
	var h, tok []byte
	for rows.Next() {
		if err := rows.Scan(&h, &tok); err != nil {
			rows.Close()
			return err
		}
		j, ok := at[string(h)+string(tok)]
		if !ok {
			rows.Close()
			return errors.New("renew: the database returned a row that is not in the batch")
		}
		held[idx[j]] = true
	}
	return errors.Join(rows.Err(), rows.Close())
}
