package postgres

import (
	"bytes"
	"context"
	"slices"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// runBatch runs the acquires of cs (sorted by key_hash) on one connection: alone,
// a call's own statement; two or more, a pipeline of their statements, each as it
// runs alone, sent at once and followed by one Sync, so that PostgreSQL runs them
// in turn in one implicit transaction, which commits at the end (one round trip,
// one commit; CURRENT_TIMESTAMP is the transaction's start). A statement sees the
// rows that the ones before it wrote: of two acquires of one key, the second
// finds it held. When the database rejects a statement, the transaction (which
// then had no effect) rolls back, and each call runs alone. An acquire that found
// no row of its key then runs insert, alone.
func (d *dialect) runBatch(ctx context.Context, cs []*call) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		setAll(cs, result{err: driver.NotSent(err), known: true})
		return
	}
	defer c.Release()
	sess, err := d.session(ctx, c)
	if err != nil {
		setAll(cs, result{err: driver.NotSent(err), known: true})
		return
	}
	if len(cs) == 1 {
		d.runOn(ctx, c, cs[0], sess)
		return
	}
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(cs))}
	for _, x := range cs {
		b.Queue(d.sql.acquire, d.acquireArgs(x.r)...)
	}
	got := make([]int64, len(cs)) // the fence, 0 or -1
	br := c.SendBatch(ctx, b)
	for i := range cs {
		if err = br.QueryRow().Scan(&got[i]); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil && d.Definite(err):
		for _, x := range cs {
			d.runOn(ctx, c, x, sess)
		}
	case err != nil:
		setAll(cs, result{err: err, sess: sess})
	default:
		for i, x := range cs {
			if got[i] >= 0 {
				x.res = result{fence: got[i], known: true, sess: sess} // won, or held (0)
			} else {
				x.res = d.insertOn(ctx, c, x.r)
				x.res.sess = sess
			}
		}
	}
}

// runOn runs the acquire of x alone on c, whose session is sess.
func (d *dialect) runOn(ctx context.Context, c *pgxpool.Conn, x *call, sess sqldialect.Session) {
	x.res = d.acquireOn(ctx, c, x.r)
	x.res.sess = sess
}

// acquireArgs are the arguments of acquire for r.
func (d *dialect) acquireArgs(r rowArgs) []any {
	// One interface value for both uses of the token: it saves a client
	// allocation.
	tok := any(r.token)
	return []any{r.hash, r.key, tok, pgtype.Interval{Microseconds: r.us, Valid: true}, d.owner, tok}
}

// setAll gives every call of cs the result res.
func setAll(cs []*call, res result) {
	for _, x := range cs {
		x.res = res
	}
}

// sendReleases runs the releases of rs: one alone as its own statement, more as
// one pipeline of their statements in key_hash order (as acquires take rows), in
// one implicit transaction. It returns whether each released its row; an error
// is every release's (the transaction's).
func (d *dialect) sendReleases(ctx context.Context, rs []sqldialect.Row) ([]bool, error) {
	if len(rs) == 1 {
		held, err := d.releaseOne(ctx, rs[0])
		return []bool{held}, err
	}
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return bytes.Compare(rs[i].Hash, rs[j].Hash) })
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(rs))}
	for _, i := range order {
		b.Queue(d.sql.release, d.releaseArgs(rs[i])...)
	}
	held := make([]bool, len(rs))
	br := d.pool.SendBatch(ctx, b)
	var err error
	for _, i := range order {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err != nil {
			break
		}
		held[i] = tag.RowsAffected() == 1
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return held, nil
}
