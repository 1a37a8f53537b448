package postgres

import (
	"bytes"
	"context"
	"fmt"

	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5"
)

// acquireBatch runs the acquires of cs (sorted by key_hash, no two of one key) in
// one statement: their rows are taken in one transaction. When the database
// rejects the statement (which then had no effect), each runs alone.
func (d *dialect) acquireBatch(ctx context.Context, cs []*call) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		setAll(cs, result{err: sqllock.NotSent(err), known: true})
		return
	}
	defer c.Release()
	sess, err := d.session(ctx, c)
	if err != nil {
		setAll(cs, result{err: sqllock.NotSent(err), known: true})
		return
	}
	each := func(run func(*call) result) {
		for _, x := range cs {
			x.res = run(x)
			x.res.sess = sess
		}
	}
	if len(cs) == 1 {
		each(func(x *call) result { return d.acquireOn(ctx, c, x.r) })
		return
	}
	hs, ks, ts := make([][]byte, len(cs)), make([][]byte, len(cs)), make([][]byte, len(cs))
	us := make([]int64, len(cs))
	for i, x := range cs {
		hs[i], ks[i], ts[i], us[i] = x.r.hash, x.r.key, x.r.token, x.r.us
	}
	fences := make([]int64, len(cs))
	seen := 0
	rows, err := c.Query(ctx, d.sql.acquireBatch, hs, ks, ts, us, d.owner)
	if err == nil {
		var i, fence int64
		_, err = pgx.ForEachRow(rows, []any{&i, &fence}, func() error {
			if i < 1 || i > int64(len(cs)) {
				return fmt.Errorf("acquire: the database returned row %d of %d", i, len(cs))
			}
			fences[i-1] = fence
			seen++
			return nil
		})
		if err == nil && seen != len(cs) {
			err = fmt.Errorf("acquire: the database returned %d rows for %d", seen, len(cs))
		}
	}
	switch {
	case err != nil && d.Definite(err):
		each(func(x *call) result { return d.acquireOn(ctx, c, x.r) })
	case err != nil:
		setAll(cs, result{err: err, sess: sess})
	default:
		for i, x := range cs {
			switch f := fences[i]; {
			case f >= 0:
				x.res = result{fence: f, known: true, sess: sess}
			case wonInBatch(cs, fences, i):
				// Another TryLock of the key took its row in this statement,
				// which has committed: this one, as concurrent, finds it held.
				x.res = result{known: true, sess: sess}
			default:
				x.res = d.insertOn(ctx, c, x.r)
				x.res.sess = sess
			}
		}
	}
}

// wonInBatch reports whether a call of cs other than cs[i], for the same key,
// took its row (cs is sorted by key_hash).
func wonInBatch(cs []*call, fences []int64, i int) bool {
	for _, dir := range []int{-1, 1} {
		for j := i + dir; j >= 0 && j < len(cs) && bytes.Equal(cs[j].r.hash, cs[i].r.hash); j += dir {
			if fences[j] > 0 {
				return true
			}
		}
	}
	return false
}

// setAll gives every call of cs the result res.
func setAll(cs []*call, res result) {
	for _, x := range cs {
		x.res = res
	}
}

// releaseBatch runs the releases of cs (sorted by key_hash, no two of one row) in
// one statement; when the database rejects it (no effect), each runs alone.
func (d *dialect) releaseBatch(ctx context.Context, cs []*call) {
	each := func() {
		for _, x := range cs {
			x.res.ok, x.res.err = d.releaseOn(ctx, d.pool, x.r)
		}
	}
	if len(cs) == 1 {
		each()
		return
	}
	hs, ks, ts := make([][]byte, len(cs)), make([][]byte, len(cs)), make([][]byte, len(cs))
	kids := make([]int32, len(cs))
	for i, x := range cs {
		hs[i], ks[i], ts[i], kids[i] = x.r.hash, x.r.key, x.r.token, keyID(x.r.hash)
	}
	released := make([]bool, len(cs))
	rows, err := d.pool.Query(ctx, d.sql.releaseBatch, hs, ks, ts, kids, d.table)
	if err == nil {
		var i int64
		_, err = pgx.ForEachRow(rows, []any{&i}, func() error {
			if i < 1 || i > int64(len(cs)) {
				return fmt.Errorf("release: the database returned row %d of %d", i, len(cs))
			}
			released[i-1] = true
			return nil
		})
	}
	switch {
	case err != nil && d.Definite(err):
		each()
	case err != nil:
		setAll(cs, result{err: err})
	default:
		for i, x := range cs {
			x.res = result{ok: released[i], known: true}
		}
	}
}
