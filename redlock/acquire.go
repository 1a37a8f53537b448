package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
)

// TryLock makes one attempt to acquire key for ttl on a quorum of the nodes.
//
// Phase 1 runs a script on every node at once that takes the node's lock if it is
// free (SET NX PX, on the node's clock) and increments the node's fence counter for
// key. Given a quorum of locks, the Lease's Fence is the largest counter among the
// nodes it locked. Where every locked node returned that largest value (the usual
// case) the attempt is done in one round trip; otherwise phase 2 raises the counter
// to the Fence on the nodes that lag, and a quorum of locked nodes must then hold a
// counter at least the Fence before TryLock succeeds. See the package documentation
// for why that makes fences increase across different majorities.
//
// The Lease's Expires is the time taken before phase 1 was sent, plus ttl, minus the
// clock-drift allowance (see Drift); TryLock fails unless Expires is still ahead when
// the quorum is complete. Each node gets NodeTimeout(ttl) per phase: a slow or dead
// node is counted as failed, not waited for.
//
// A failed attempt removes the locks it made (and any it may have made, on nodes
// whose outcome is unknown) on every node, with a fresh context bounded by
// Options.CleanupTimeout, never the caller's dead one. It returns an error
// wrapping distlock.ErrLocked, naming the owner that holds the most nodes, when
// other owners hold the key on nodes that answered and keep this attempt from a
// quorum that the answering nodes could otherwise have given. Otherwise (too few
// nodes answered, the quorum took longer than the validity, ctx ended) it returns
// an error that does not wrap ErrLocked and names each failing node. Every error is
// an *distlock.OpError.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // before anything else: Expires counts from here
	if err := l.group.Enter(); err != nil {
		return distlock.Lease{}, opError("TryLock", key, err)
	}
	defer l.group.Leave()
	lease, err := l.tryLockChecked(ctx, key, ttl, start)
	if err != nil {
		return distlock.Lease{}, opError("TryLock", key, err)
	}
	return lease, nil
}

func (l *Locker) tryLockChecked(ctx context.Context, key string, ttl time.Duration, start time.Time) (distlock.Lease, error) {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := l.checkTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, err
	}
	l.queue.Attempt(key) // a woken waiter's attempt ends its handoff
	return l.flights.run(ctx, key, start, func() (distlock.Lease, error) {
		lease, err := l.tryLock(ctx, key, ttl, start, true)
		if err != nil && !errors.Is(err, distlock.ErrLocked) {
			l.queue.AttemptFailed(key) // nobody may take the key: wake the next waiter
		}
		return lease, err
	})
}

// tryLock is one attempt of TryLock, whose call began at start. When it finds a
// fresh deployment (every node answered, none counts yet) and bootstrap is set, it
// brings the nodes in and makes one more attempt (see nodestate.go).
func (l *Locker) tryLock(ctx context.Context, key string, ttl time.Duration, start time.Time, bootstrap bool) (distlock.Lease, error) {
	n := l.names(key)
	token := driver.NewToken()
	ms := redisx.Millis(ttl)
	nt := l.NodeTimeout(ttl)
	expires := start.Add(ttl - l.Drift(ttl))

	// Nodes that answer after phase 1 stopped waiting for them (late) join the
	// lease if the attempt succeeded (their counter raised to its fence) and are
	// released if it failed, or if the lease was unlocked meanwhile; those that
	// answer before the outcome is known wait for it in att.
	att := &attempt{}
	settle := func(e lateReply) {
		if e.err == nil && e.v.out != nil { // kept out: adopt it (adopt.go)
			if att.succeeded && e.v.out.epoch == token {
				l.tagLater(ctx, e.i, token) // found empty in a running deployment
			}
			l.adoptLater(e.i, max(e.v.out.left, 0))
			return
		}
		if e.err == nil && !e.v.locked {
			return // another owner's lock: nothing of ours
		}
		if att.succeeded && !att.unlocked.Load() && e.err == nil && e.v.fence == att.fence {
			return // in step: the lock already records the lease's fence
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.CleanupTimeout)
		defer cancel()
		if att.succeeded && !att.unlocked.Load() {
			_, _ = l.raiseOn(cctx, e.i, n, token, att.fence)
		} else {
			_, _ = l.releaseOn(cctx, e.i, newReleaseCall(n, token))
		}
	}
	seen := l.peek(n) // for a Wait that follows (sighting.go)
	mode := l.turnMode(key, seen)
	// The script's keys and arguments, built once for all the nodes.
	call := acquireCall{
		keys: []string{n.Lock, n.Fence, l.state.marker, l.state.quarantine},
		args: []any{token, ms, l.opts.Owner, l.quarantineMS},
	}
	// The key's turns (turns.go), and since when l waits on key (turnSince).
	var score int64
	if mode != turnNone {
		call.keys = append(call.keys, turnsName(n, key))
		score = l.turnSince(key, start.UnixMicro())
		call.args = append(call.args, l.idArg, mode, score, start.UnixMicro())
	}
	// Phase 1 lingers for the slower nodes once decided (see fanout): a lease that
	// holds more than a bare quorum survives a node's loss, and Unlock right after
	// TryLock finds every lock made. Answers later still join the lease or are
	// released.
	res := fanout(ctx, l, nil, nt,
		func(ctx context.Context, i int) (phase1, error) { return l.acquireOn(ctx, i, call) },
		func(i int, r phase1, err error) {
			e := lateReply{i, r, err}
			if att.lateAnswer(e) {
				settle(e)
				att.settled(l, token)
			}
		},
		l.decidedAcquire, true)
	defer func() {
		// Settle the late answers that came before the outcome was known.
		for _, e := range att.early {
			if e.err == nil && !e.v.locked && e.v.out == nil {
				att.settled(l, token)
				continue
			}
			l.group.Go(func() {
				settle(e)
				att.settled(l, token)
			})
		}
	}()
	var locked, held, failed []int
	var fence int64
	for i, r := range res {
		switch {
		case r.err != nil:
			failed = append(failed, i)
		case r.v.out != nil: // took nothing: counts as neither locked nor held
		case r.v.locked:
			locked = append(locked, i)
			fence = max(fence, r.v.fence)
		default:
			held = append(held, i)
		}
	}
	fail := func(err error) (distlock.Lease, error) {
		att.decide(l, token, res, false, 0)
		// Wait for the locks that answered (they answer fast); nodes whose outcome is
		// unknown are cleaned up in the background.
		c := newReleaseCall(n, token)
		if mode != turnNone && errors.Is(err, distlock.ErrLocked) {
			c = newJoinCall(n, key, token, l.id, score, ms)
		}
		l.release(ctx, locked, c, nt)
		l.release(ctx, failed, c, 0)
		return distlock.Lease{}, err
	}
	if again, err := l.settleNodes(ctx, res, bootstrap && len(locked) == 0); again {
		att.decide(l, token, res, false, 0)
		return l.tryLock(ctx, key, ttl, start, false)
	} else if err != nil {
		return fail(err)
	}
	if len(locked) < l.quorum {
		err := l.noQuorum(ctx, key, res, locked, held)
		if errors.Is(err, distlock.ErrLocked) {
			l.saw(n, seen, res, held)
			l.queued(key, mode != turnNone)
			if mode != turnNone {
				digests := make([]string, 0, len(held))
				for _, i := range held {
					digests = append(digests, res[i].v.digest)
				}
				l.releasing(key, len(locked), digests)
			}
		}
		return fail(err)
	}

	// Phase 2: raise the lagging counters. Only locked nodes count towards the
	// quorum; raising the others too keeps the counters in step for later
	// acquisitions.
	ok := 0
	var lagLocked []int
	for i, r := range res {
		switch {
		case r.err != nil, r.v.out != nil:
		case !r.v.locked:
			// Another owner's lock: phase 1 did not read its counter, which that
			// owner's own attempt incremented. Raising it is not needed for
			// safety (only locked nodes count); a later phase 2 raises it if it lags.
		case r.v.fence >= fence:
			ok++
		default:
			lagLocked = append(lagLocked, i)
		}
	}
	raise := func(ctx context.Context, i int) (bool, error) { return l.raiseOn(ctx, i, n, token, fence) }
	if ok < l.quorum {
		res2 := fanout(ctx, l, lagLocked, nt, raise, nil, func(res []reply[bool]) bool {
			more := 0
			for _, i := range lagLocked {
				if r := res[i]; r.answered && r.err == nil && r.v {
					more++
				}
			}
			return ok+more >= l.quorum
		}, false)
		for _, i := range lagLocked {
			if r := res2[i]; r.err == nil && r.v {
				ok++
			}
		}
		if ok < l.quorum {
			errs := nodeErrors(l, res2)
			if ctx.Err() != nil {
				errs = append(errs, ctx.Err())
			}
			return fail(fmt.Errorf("fence %d recorded on only %d of %d nodes (quorum %d); released: %w",
				fence, ok, len(l.nodes), l.quorum, errors.Join(errs...)))
		}
	} else if lag := lagLocked; len(lag) > 0 {
		// Not needed for this lease: raise in the background, bounded.
		l.group.Go(func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.CleanupTimeout)
			defer cancel()
			fanout(cctx, l, lag, nt, raise, nil, nil, false)
		})
	}
	if now := time.Now(); !expires.After(now) {
		return fail(fmt.Errorf("the quorum took %v, more than ttl %v less the drift allowance %v; released",
			now.Sub(start), ttl, l.Drift(ttl)))
	}
	att.decide(l, token, res, true, fence)
	l.acquired(key, token)
	l.queued(key, mode == turnAgain)
	l.took(key)
	return distlock.Lease{Key: key, Token: token, Fence: uint64(fence), Expires: expires}, nil
}

// noQuorum builds the error of an attempt that locked fewer than a quorum of nodes.
func (l *Locker) noQuorum(ctx context.Context, key string, res []reply[phase1], locked, held []int) error {
	answered := len(locked) + len(held)
	if len(held) > 0 && answered >= l.quorum && ctx.Err() == nil {
		// The answering nodes could have made a quorum: other owners took it.
		owners := make(map[string]int)
		digests := make(map[string]int)
		var holdFor time.Duration
		for _, i := range held {
			owners[res[i].v.owner]++
			digests[res[i].v.digest]++
			holdFor = max(holdFor, res[i].v.holdFor)
		}
		l.learn(key, digests, len(l.nodes)-len(held)) // for the Waits (herd.go)
		top, most := "", 0
		for o, c := range owners {
			if c > most || (c == most && o < top) {
				top, most = o, c
			}
		}
		return fmt.Errorf("held by %q on %d of %d nodes (%d held by others in all, %d answered, quorum %d) for up to %v more: %w",
			top, most, len(l.nodes), len(held), answered, l.quorum, holdFor, distlock.ErrLocked)
	}
	errs := nodeErrors(l, res)
	for i, r := range res {
		if r.err == nil && r.v.out != nil {
			errs = append(errs, fmt.Errorf("%s: %v", l.nodes[i].Name, r.v.out))
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return fmt.Errorf("locked %d of %d nodes, %d held by others, %d failed or kept out (quorum %d); released: %w",
		len(locked), len(l.nodes), len(held), len(l.nodes)-answered, l.quorum, errors.Join(errs...))
}

// decidedAcquire reports whether phase 1's answers so far decide TryLock's result,
// including which error it returns: a quorum locked; or a quorum is out of reach
// and either other owners' locks are what keeps it so among enough answering nodes
// to call it contention (ErrLocked), or so many nodes failed that it cannot be
// contention (another error).
func (l *Locker) decidedAcquire(res []reply[phase1]) bool {
	locked, held, failed, waiting, out := 0, 0, 0, 0, 0
	for _, r := range res {
		switch {
		case r.answered && r.err == nil && r.v.out != nil:
			failed++
			out++
		case r.err != nil:
			failed++
		case !r.answered && r.suspect: // neither failed nor waited for
		case !r.answered:
			waiting++
		case r.v.locked:
			locked++
		default:
			held++
		}
	}
	if out > 0 && waiting > 0 {
		// A node that does not count yet: hear every other node, to bring a
		// fresh deployment in at once (nodestate.go), or to know each node's state.
		return false
	}
	q := l.quorum
	return locked >= q || failed > len(l.nodes)-q || (locked+waiting < q && held > 0 && locked+held >= q)
}
