package sqllock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/sqllock/sqldialect"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// rows is the driver.Driver of a Locker: each operation is one attempt of its
// Dialect's statement on the key's row; driver.Locker does the rest (validation,
// Expires, retries, clean-up, errors).
type rows struct {
	d sqldialect.Dialect
	o Options
	// renews is the batcher of the Renews when d is a BatchRenewer, else nil.
	renews *driver.Batcher[renewReq, bool]
}

var (
	_ driver.Driver     = (*rows)(nil)
	_ driver.Classifier = (*rows)(nil)
	_ driver.Inspector  = (*rows)(nil)
)

// row returns the row of key for token.
func row(key, token string) sqldialect.Row {
	h := sha256.Sum256([]byte(key))
	return sqldialect.Row{Hash: h[:], Key: []byte(key), Token: []byte(token)}
}

// An acquireError is the error of an Acquire of unknown outcome, with the database
// session its statement was sent on, which Abandon ends first.
type acquireError struct {
	err  error
	sess sqldialect.Session
}

func (e *acquireError) Error() string { return e.err.Error() }
func (e *acquireError) Unwrap() error { return e.err }

func (r *rows) Acquire(ctx context.Context, key, token string, ttl time.Duration) (uint64, error) {
	fence, won, sess, err := r.d.Acquire(ctx, row(key, token), ttl)
	switch {
	case err != nil:
		return 0, &acquireError{err: err, sess: sess}
	case !won:
		return 0, distlock.ErrLocked
	case fence <= 0:
		return 0, fmt.Errorf("the database returned fence %d", fence)
	}
	return uint64(fence), nil
}

// Abandon ends the database session that the abandoned statement was sent on
// (bounded by Options.EndSessionTimeout; skipped when it could not be named, or the
// statement committed), then releases the row that token may own. If the session
// could not be named or ended (a pooler in between, no privilege, the database out
// of reach), the release still runs, and a statement that arrives later may hold
// the key until its ttl runs out (see the package doc).
func (r *rows) Abandon(ctx context.Context, key, token string, _ time.Duration, cause error) error {
	var ae *acquireError
	if errors.As(cause, &ae) && ae.sess.ID != 0 {
		ectx, cancel := context.WithTimeout(ctx, r.o.EndSessionTimeout)
		_ = r.endSession(ectx, ae.sess)
		cancel()
	}
	_, err := r.d.Release(ctx, row(key, token))
	return err
}

func (r *rows) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) error {
	req := renewReq{r: row(lease.Key, lease.Token), ttl: ttl}
	var held bool
	var err error
	if r.renews != nil {
		held, err = r.renews.Do(ctx, req)
	} else {
		held, err = r.d.Renew(ctx, req.r, ttl)
	}
	if err == nil && !held {
		err = distlock.ErrNotHeld
	}
	return err
}

func (r *rows) Release(ctx context.Context, lease distlock.Lease) error {
	held, err := r.d.Release(ctx, row(lease.Key, lease.Token))
	if err == nil && !held {
		err = distlock.ErrNotHeld
	}
	return err
}

func (r *rows) Inspect(ctx context.Context, key string) (distlock.Holder, time.Duration, error) {
	st, found, err := r.d.Inspect(ctx, row(key, ""))
	if err == nil && !found {
		err = distlock.ErrNotHeld
	}
	if err != nil {
		return distlock.Holder{}, 0, err
	}
	return distlock.Holder{Fence: uint64(st.Fence), Owner: st.Owner}, st.Remaining, nil
}

func (r *rows) Retryable(err error) bool { return r.d.Retryable(err) }

func (r *rows) Definite(err error) bool {
	return driver.IsNotSent(err) || r.d.Definite(err)
}

// The Renew batches: at most maxRenewBatch rows; a statement stops holding up the
// queue after renewStall.
const (
	maxRenewBatch = 1000
	renewStall    = 100 * time.Millisecond
)

type renewReq struct {
	r   sqldialect.Row
	ttl time.Duration
}

// newRenews returns the batcher of the Renews of br, whose statements stop holding
// up the queue after stall, and whose goroutines goFn runs.
func newRenews(br sqldialect.BatchRenewer, d sqldialect.Dialect, stall time.Duration, goFn func(func())) *driver.Batcher[renewReq, bool] {
	send := func(ctx context.Context, reqs []renewReq) ([]bool, error) {
		if len(reqs) == 1 { // the plain statement
			held, err := d.Renew(ctx, reqs[0].r, reqs[0].ttl)
			return []bool{held}, err
		}
		rs := make([]sqldialect.Row, len(reqs))
		ttls := make([]time.Duration, len(reqs))
		for i, q := range reqs {
			rs[i], ttls[i] = q.r, q.ttl
		}
		return br.RenewBatch(ctx, rs, ttls)
	}
	return driver.NewBatcher(send, driver.BatchOptions[renewReq]{
		MaxBatch: maxRenewBatch,
		Inline:   true, // every Dialect statement returns once its context is done
		Stall:    stall,
		Same: func(a, b renewReq) bool {
			return bytes.Equal(a.r.Hash, b.r.Hash) && bytes.Equal(a.r.Token, b.r.Token)
		},
		Go: goFn,
	})
}
