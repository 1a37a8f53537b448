package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"
)

var _ sqldialect.BatchRenewer = (*dialect)(nil)

// renewBatchSQL returns the UPDATE ... FROM (VALUES ...) ... RETURNING that renews
// n rows: each held row (no two of the batch with the same key_hash and token)
// gets the later of its expiry and now + its ttl, and is returned by key_hash and
// token (SQLite's RETURNING may not name the FROM clause's columns). SQLite makes
// every change of a statement with RETURNING in its first step, with one reading
// of the clock.
func renewBatchSQL(table string, n int) string {
	var b strings.Builder
	b.WriteString(`WITH v(h, k, tok, ms) AS (VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?)")
	}
	b.WriteString(`)
UPDATE ` + table + ` SET expires_at = max(expires_at, ` + now + ` + v.ms)
FROM v WHERE key_hash = v.h AND lock_key = v.k AND token = v.tok AND expires_at > ` + now + `
RETURNING key_hash, token`)
	return b.String()
}

// RenewBatch renews rs in one statement, in the gate's next group commit
// (sqldialect.BatchRenewer).
func (d *dialect) RenewBatch(ctx context.Context, rs []sqldialect.Row, ttls []time.Duration) ([]bool, error) {
	args := make([]any, 0, 4*len(rs))
	at := make(map[string]int, len(rs)) // key_hash (32 bytes) + token -> index
	for i, r := range rs {
		args = append(args, r.Hash, r.Key, r.Token, millis(ttls[i]))
		at[string(r.Hash)+string(r.Token)] = i
	}
	q := renewBatchSQL(d.sql.table, len(rs))
	held := make([]bool, len(rs))
	err := d.gate.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		clear(held)
		rows, err := c.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		var h, tok []byte
		for rows.Next() {
			if err := rows.Scan(&h, &tok); err != nil {
				rows.Close()
				return err
			}
			i, ok := at[string(h)+string(tok)]
			if !ok {
				rows.Close()
				return errors.New("renew: the database returned a row that is not in the batch")
			}
			held[i] = true
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return nil, err
	}
	return held, nil
}
