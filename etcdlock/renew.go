package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Renew extends lease to ttl from now: the returned Lease's Expires is the call's
// start plus ttl. It never shortens what the server holds: when ttl, rounded up to
// whole seconds, is not longer than the TTL of the key's etcd lease, it refreshes
// that lease (which then holds the key for its full TTL, at least ttl); when ttl
// is longer, it moves the key to a new lease of ttl in one transaction. Either way
// the server holds the key at least until the old Lease's Expires, also when
// Renew fails with an unknown outcome (a lost reply), so the old Expires still
// bounds the lease then. It returns an error wrapping ErrNotHeld when the key is
// gone, was taken by another acquisition, or its lease expired, and, without a
// request, when it starts at or after the Lease's Expires: Renew never revives a
// lease whose holder was told it ended. A refresh or move whose reply comes at or
// after the Lease's Expires does not count either: Renew returns an error (not
// ErrNotHeld, since the server holds the key) and the Lease's Expires stands. The
// key is not freed then: another copy of the Lease, renewed meanwhile, may still
// hold it, so it stays until that lease's TTL ends or the holder unlocks it.
//
// A refresh cannot be made conditional on the key (etcd's transactions have no
// lease operations), so Renew reads the key after it, linearizably: a member cut
// off from the quorum cannot answer, so a holder whose client reaches only such a
// member cannot renew, and the key of an Unlock that ran in between, whose
// revocation failed, leaves the lease refreshed but holding nothing, and Renew
// says ErrNotHeld instead of success. It reads the key before the refresh too,
// to learn its etcd lease, unless this Locker recorded that lease with the
// acquisition.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	cctx, id, err := l.begin(ctx)
	if err != nil {
		return distlock.Lease{}, opError("Renew", lease.Key, err)
	}
	defer l.end(id)
	next, err := l.renew(cctx, lease, ttl, start)
	if err != nil {
		return distlock.Lease{}, fail(cctx, "Renew", lease.Key, err)
	}
	return next, nil
}

// maxRefreshes bounds the refreshes of one Renew that find the key moved to
// another lease (by a concurrent Renew of the same Lease, which is a misuse).
const maxRefreshes = 3

func (l *Locker) renew(ctx context.Context, lease distlock.Lease, ttl time.Duration, start time.Time) (distlock.Lease, error) {
	if err := checkLease(lease); err != nil {
		return lease, err
	}
	if err := checkTTL(ttl); err != nil {
		return lease, err
	}
	if err := ctx.Err(); err != nil {
		return lease, err
	}
	if !start.Before(lease.Expires) {
		return lease, fmt.Errorf("the lease's Expires passed %v before the Renew: %w", start.Sub(lease.Expires), distlock.ErrNotHeld)
	}
	k, lk, secs := l.etcdKey(lease.Key), lostKey{lease.Key, lease.Fence}, leaseSecs(ttl)
	// The etcd lease to refresh: the one this Locker recorded for the
	// acquisition, refreshed before any read (two round trips), or else the one
	// that a read of the key (kv) shows.
	var kv *mvccpb.KeyValue
	id, recorded := l.recordedLease(lk, lease.Token, secs)
	if !recorded {
		var err error
		if kv, err = l.read(ctx, k, lease); err != nil {
			return lease, err
		}
	}
	for range maxRefreshes {
		if kv != nil {
			// The value records the seconds the key's lease was granted with (the
			// server may have raised them, never lowered).
			if held, _ := parseValue(kv.Value); secs > held {
				return l.move(ctx, lease, kv, start, ttl)
			}
			id = clientv3.LeaseID(kv.Lease)
		}
		at := time.Now()
		granted, err := l.refresh(ctx, id, kv != nil)
		if err != nil && kv == nil && ctx.Err() == nil {
			// The recorded lease is gone (another Locker moved the key), or its
			// one attempt failed: read the key, so that a key that is not held
			// gives ErrNotHeld, and go on with the lease that holds it.
			if kv, err = l.read(ctx, k, lease); err != nil {
				return lease, err
			}
			continue
		}
		if err != nil {
			return lease, err
		}
		if err := refreshedInTime(lease.Expires); err != nil {
			return lease, err
		}
		// Confirm that the refreshed lease held the key after the refresh: then
		// the server holds the key for that lease's TTL from the refresh on.
		if kv, err = l.read(ctx, k, lease); err != nil {
			return lease, err
		}
		if clientv3.LeaseID(kv.Lease) == id {
			l.refreshed(lk, id, granted, at)
			lease.Expires = start.Add(min(ttl, granted))
			return renewed(lease, start, ttl)
		}
	}
	return lease, fmt.Errorf("the key moved to another etcd lease during each of %d refreshes (concurrent Renews of one Lease?)", maxRefreshes)
}

// recordedLease returns the etcd lease that this Locker recorded for the
// acquisition lk of token, if its whole seconds are at least secs (the key's
// value records them: TryLock and move put the key on a lease of those seconds).
func (l *Locker) recordedLease(lk lostKey, token string, secs int64) (clientv3.LeaseID, bool) {
	h, ok := l.heldOf(lk)
	if !ok || h.token != token || secs > h.secs {
		return 0, false
	}
	return h.id, true
}

// read reads the lock key k of lease, linearizably (batched with other reads), and returns it, or an error
// wrapping ErrNotHeld when lease does not own it.
func (l *Locker) read(ctx context.Context, k string, lease distlock.Lease) (*mvccpb.KeyValue, error) {
	var get *clientv3.GetResponse
	err := l.call(ctx, func(ctx context.Context) (err error) {
		get, err = l.batchGet(ctx, k)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(get.Kvs) == 0 || !owns(get.Kvs[0], lease) {
		if len(get.Kvs) == 0 || uint64(get.Kvs[0].CreateRevision) != lease.Fence {
			l.endLoss(k, lease.Fence) // the acquisition ended: Lost need not wait for the watch
		}
		return nil, notHeld(get.Kvs)
	}
	return get.Kvs[0], nil
}

// refresh refreshes the etcd lease id (a keepalive) and returns its TTL, which
// runs from the refresh on: with the retries of call, or in one attempt.
func (l *Locker) refresh(ctx context.Context, id clientv3.LeaseID, retry bool) (time.Duration, error) {
	var ttl int64
	op := func(ctx context.Context) (err error) {
		ttl, err = l.keepAlive(ctx, id)
		return err
	}
	var err error
	if retry {
		err = l.call(ctx, op)
	} else {
		err = l.once(ctx, op)
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, fmt.Errorf("the lease expired: %w", distlock.ErrNotHeld)
	}
	if err != nil {
		return 0, err
	}
	return time.Duration(ttl) * time.Second, nil
}

// refreshedInTime returns nil when the reply of a refresh of a lease whose
// holder was told it ends at bound, which just came, came before bound; else an
// error (not ErrNotHeld: the server holds the key): a refresh or move answered at
// or after bound does not count (Renew never revives a lease). A Wait's chase relies on this
// contract's rule, and on no other of Renew's, when it revokes a lease that the
// leader holds expired (see Failover in the package doc): no holder's Expires on
// that lease passes its expiry at the leader.
func refreshedInTime(bound time.Time) error {
	if now := time.Now(); !now.Before(bound) {
		return fmt.Errorf("the renewal was answered %v after the Lease's Expires, too late to count: the Lease's Expires stands", now.Sub(bound))
	}
	return nil
}

// renewed returns lease, or an error (not ErrNotHeld: the server holds the key)
// when its new Expires has passed already: the renewal took longer than ttl.
func renewed(lease distlock.Lease, start time.Time, ttl time.Duration) (distlock.Lease, error) {
	if !time.Now().Before(lease.Expires) {
		return lease, fmt.Errorf("the renewal took %v, longer than the ttl %v", time.Since(start), ttl)
	}
	return lease, nil
}

// move renews lease for a ttl longer than its etcd lease's TTL: it grants a lease
// of ttl and moves the key kv to it in one transaction, keeping its create
// revision (the Fence) and token, then revokes the old lease.
//
// A move counts only as a refresh does (see refreshedInTime): when its reply
// comes before the Lease's Expires, since Renew never revives a lease. So a move
// is not even tried once Expires has passed, and one answered after it returns an
// error; the key stays on the new lease (another copy of the Lease may hold it),
// which the Locker records, as it does after a move in time, so that Unlock
// revokes it.
func (l *Locker) move(ctx context.Context, lease distlock.Lease, kv *mvccpb.KeyValue, start time.Time, ttl time.Duration) (distlock.Lease, error) {
	if now := time.Now(); !now.Before(lease.Expires) {
		return distlock.Lease{}, fmt.Errorf("the lease's Expires passed %v before its move to a lease of ttl %v: %w", now.Sub(lease.Expires), ttl, distlock.ErrNotHeld)
	}
	k, old, secs := string(kv.Key), clientv3.LeaseID(kv.Lease), leaseSecs(ttl)
	grant, err := l.grant(ctx, secs)
	if err != nil {
		return distlock.Lease{}, err
	}
	value := valueFrom(kv.Value, secs)
	// Safe to repeat: an attempt after one that moved the key finds it on the new
	// lease (below).
	var resp *clientv3.TxnResponse
	err = l.call(ctx, func(ctx context.Context) (err error) {
		resp, err = l.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", kv.CreateRevision),
				clientv3.Compare(clientv3.Value(k), "=", string(kv.Value)),
				clientv3.Compare(clientv3.LeaseValue(k), "=", old)).
			Then(clientv3.OpPut(k, value, clientv3.WithLease(grant.id))).
			Else(clientv3.OpGet(k)).
			Commit()
		return err
	})
	if err != nil {
		// Unknown outcome: the key may be on the new lease or still on the old one,
		// each of which holds it past the old Expires. Revoking either could free
		// a key the caller may still hold, so both are left to expire by their ttl
		// (and Unlock revokes the one it finds, which the Locker forgets).
		l.forget(lostKey{lease.Key, lease.Fence})
		return distlock.Lease{}, err
	}
	rev := resp.Header.Revision // the put's
	if !resp.Succeeded {
		if !movedTo(resp, kv.CreateRevision, value, grant.id) {
			l.revoke(ctx, grant.id)
			return distlock.Lease{}, fmt.Errorf("the key changed or its lease expired: %w", distlock.ErrNotHeld)
		}
		rev = resp.Responses[0].GetResponseRange().Kvs[0].ModRevision
	}
	grant.token, grant.rev = lease.Token, rev
	l.hold(lostKey{lease.Key, lease.Fence}, grant)
	l.revoke(ctx, old) // it holds no key now
	if err := refreshedInTime(lease.Expires); err != nil {
		return distlock.Lease{}, err
	}
	lease.Expires = start.Add(ttl)
	return renewed(lease, start, ttl)
}

// movedTo reports whether the Else read of a failed move shows the key already
// moved, by an earlier attempt whose reply was lost: same create revision, the new
// value, on the new lease.
func movedTo(resp *clientv3.TxnResponse, createRev int64, value string, id clientv3.LeaseID) bool {
	r := resp.Responses[0].GetResponseRange()
	if r == nil || len(r.Kvs) == 0 {
		return false
	}
	kv := r.Kvs[0]
	return kv.CreateRevision == createRev && string(kv.Value) == value && clientv3.LeaseID(kv.Lease) == id
}
