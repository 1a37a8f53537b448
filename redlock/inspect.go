package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// decidedView reports whether Inspect's answers so far decide its outcome: one token
// holds a quorum, no token can reach one, or too many nodes failed.
func (l *Locker) decidedView(res []reply[lockView]) bool {
	ok, failed, suspects, most := 0, 0, 0, 0
	count := make(map[string]int)
	for _, r := range res {
		switch {
		case r.err != nil:
			failed++
		case !r.answered && r.suspect:
			suspects++
		case !r.answered:
		default:
			ok++
			if !r.v.free {
				count[r.v.token]++
				most = max(most, count[r.v.token])
			}
		}
	}
	unanswered := len(l.nodes) - ok - failed - suspects
	return most >= l.quorum || failed > len(l.nodes)-l.quorum || (ok >= l.quorum && most+unanswered < l.quorum)
}

// lockView is one node's lock as inspectScript reads it.
type lockView struct {
	free         bool
	token, owner string
	fence        uint64
	pttl         time.Duration // -1ns: no time to live
}

// Inspect returns the quorum's view of key: the holder whose token holds the lock on
// a quorum of nodes, with the largest fence any of those nodes records for it, its
// owner label and, as Expires, the time taken before the request was sent plus the
// time until fewer than a quorum of its locks remain (by the nodes' remaining times
// to live, less the drift allowance of that time). It returns an error wrapping
// distlock.ErrNotHeld when no token holds a quorum (the key is free, or an
// acquisition is half-way), and another error when fewer than a quorum of nodes
// answered. Each node gets Options.NodeTimeout.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if err := l.group.Enter(); err != nil {
		return distlock.Holder{}, opError("Inspect", key, err)
	}
	defer l.group.Leave()
	h, err := l.inspect(ctx, key)
	if err != nil {
		return distlock.Holder{}, opError("Inspect", key, err)
	}
	return h, nil
}

func (l *Locker) inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Holder{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Holder{}, err
	}
	n := l.names(key)
	start := time.Now()
	res := fanout(ctx, l, nil, l.opts.NodeTimeout, func(ctx context.Context, i int) (lockView, error) {
		return l.inspectOn(ctx, i, n.Lock)
	}, nil, l.decidedView, false)
	answered := 0
	byToken := make(map[string][]lockView)
	for _, r := range res {
		if r.err != nil {
			continue
		}
		answered++
		if !r.v.free && r.v.pttl != 0 {
			byToken[r.v.token] = append(byToken[r.v.token], r.v)
		}
	}
	for _, views := range byToken {
		if len(views) >= l.quorum {
			return l.holder(key, views, start), nil
		}
	}
	if answered < l.quorum {
		errs := nodeErrors(l, res)
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
		}
		return distlock.Holder{}, fmt.Errorf("only %d of %d nodes answered (quorum %d): %w", answered, len(l.nodes), l.quorum, errors.Join(errs...))
	}
	return distlock.Holder{}, fmt.Errorf("no owner holds it on a quorum of %d of %d nodes: %w", l.quorum, len(l.nodes), distlock.ErrNotHeld)
}

// inspectOn reads the lock (Redis name lock) on node i.
func (l *Locker) inspectOn(ctx context.Context, i int, lock string) (lockView, error) {
	v, err := l.nodes[i].Run(ctx, inspectScript, []string{lock}).Slice()
	if errors.Is(err, redis.Nil) {
		return lockView{free: true}, nil
	}
	if err != nil {
		return lockView{}, err
	}
	if len(v) != 4 {
		return lockView{}, fmt.Errorf("unexpected reply %#v from the inspect script", v)
	}
	token, _ := v[0].(string)
	fs, _ := v[1].(string)
	owner, _ := v[2].(string)
	pttl, _ := v[3].(int64)
	fence, _ := strconv.ParseUint(fs, 10, 64)
	d := time.Duration(pttl) * time.Millisecond
	if pttl < 0 {
		d = -1
	}
	return lockView{token: token, owner: owner, fence: fence, pttl: d}, nil
}

// holder is the Holder of key whose token's locks, read from a quorum of nodes
// or more, are views (see Inspect); start is when the read began.
func (l *Locker) holder(key string, views []lockView, start time.Time) distlock.Holder {
	h := distlock.Holder{Key: key}
	ttls := make([]time.Duration, 0, len(views))
	for _, v := range views {
		if v.fence > h.Fence {
			h.Fence, h.Owner = v.fence, v.owner
		}
		if h.Owner == "" {
			h.Owner = v.owner
		}
		if v.pttl < 0 {
			ttls = append(ttls, time.Duration(math.MaxInt64))
		} else {
			ttls = append(ttls, v.pttl)
		}
	}
	// The quorum dissolves when the quorum-th longest lock expires.
	slices.SortFunc(ttls, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	left := ttls[l.quorum-1]
	if left == time.Duration(math.MaxInt64) {
		left = 0 // no time to live: not one of ours; report no deadline
	} else {
		left -= l.drift(left)
	}
	if left > 0 {
		h.Expires = start.Add(left)
	}
	return h
}
