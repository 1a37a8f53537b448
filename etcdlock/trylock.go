package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TryLock makes one attempt to acquire key for ttl: it creates the key, in one
// transaction that succeeds only if the key does not exist, on a lease of ttl
// rounded up to whole seconds. The lease is a spare of the Locker (one that an
// Unlock released, or that a TryLock which found its key held kept) when it has
// one of those whole seconds, else a new grant. A spare that would give the Lease
// less than ttl minus a tenth of ttl (at most a second) is refreshed first (a
// refresh answered after the spare's expiry does not count: TryLock then grants
// a lease). The
// Lease's Expires is the call's start plus ttl, or the lease's expiry (the time
// taken before the request that last set its TTL, plus that TTL) if that comes
// first. It returns an error wrapping ErrLocked when another lease holds the key;
// it then keeps its lease as a spare. When the attempt fails otherwise, TryLock
// revokes its lease.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	cctx, id, err := l.begin(ctx)
	if err != nil {
		return distlock.Lease{}, opError("TryLock", key, err)
	}
	defer l.end(id)
	l.waiters.Attempt(key)
	lease, err := l.tryLock(cctx, key, ttl, start)
	if err != nil {
		if !errors.Is(err, distlock.ErrLocked) {
			l.waiters.AttemptFailed(key)
		}
		return distlock.Lease{}, fail(cctx, "TryLock", key, err)
	}
	return lease, nil
}

func (l *Locker) tryLock(ctx context.Context, key string, ttl time.Duration, start time.Time) (distlock.Lease, error) {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := checkTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, err
	}
	secs := leaseSecs(ttl)
	k := l.etcdKeyBytes(key)
	token := driver.NewToken()
	value := l.valueBytes(token, secs)
	sp, spare, err := l.leaseFor(ctx, secs, ttl, start)
	if err != nil {
		return distlock.Lease{}, err
	}
	resp, err := l.createOn(ctx, k, value, &sp)
	if err != nil && spare && errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The spare lease is gone (revoked from outside): grant one.
		if sp, err = l.grant(ctx, secs); err != nil {
			return distlock.Lease{}, err
		}
		resp, err = l.createOn(ctx, k, value, &sp)
	}
	if err != nil {
		// The key may have been created: revoking the lease removes it.
		l.revoke(ctx, sp.id)
		return distlock.Lease{}, err
	}
	fence, err := l.acquired(key, token, resp, &sp, start)
	if err != nil {
		return distlock.Lease{}, err
	}
	// The server frees the key no sooner than the lease's expiry (for a fresh
	// grant, after start + ttl; for a spare it may come sooner).
	expires := minTime(start.Add(ttl), sp.expiry())
	if !time.Now().Before(expires) {
		// Too late to be of use: free the key rather than hold it for nobody.
		l.revoke(ctx, sp.id)
		return distlock.Lease{}, fmt.Errorf("the key was created, but the attempt took %v, longer than the ttl %v; released it", time.Since(start), ttl)
	}
	sp.token = token
	l.hold(lostKey{key, fence}, sp)
	return distlock.Lease{Key: key, Token: token, Fence: fence, Expires: expires}, nil
}

// leaseFor returns the lease for a TryLock of ttl (secs whole seconds) that
// started at start: a spare of secs, refreshed first when it would give the Lease
// too little (spare), or a new grant.
func (l *Locker) leaseFor(ctx context.Context, secs int64, ttl time.Duration, start time.Time) (sp leaseInfo, spare bool, err error) {
	if sp, stale, ok := l.takeSpare(secs, ttl, start); ok {
		if !stale || l.refreshSpare(ctx, &sp) == nil {
			return sp, true, nil
		}
		// It holds no key: let it expire, and grant one.
	}
	sp, err = l.grant(ctx, secs)
	return sp, false, err
}

// grant grants a lease of secs whole seconds.
func (l *Locker) grant(ctx context.Context, secs int64) (leaseInfo, error) {
	at := time.Now()
	var grant *clientv3.LeaseGrantResponse
	err := l.call(ctx, func(ctx context.Context) (err error) {
		grant, err = l.client.Grant(ctx, secs)
		return err
	})
	if err != nil {
		// If a grant reached the server, its lease has no key and expires alone.
		return leaseInfo{}, fmt.Errorf("grant a lease of %ds: %w", secs, err)
	}
	return leaseInfo{id: grant.ID, secs: secs, ttl: time.Duration(grant.TTL) * time.Second, at: at}, nil
}

// createOn runs TryLock's transaction, which puts value on the key k with the
// lease sp if k does not exist, and marks sp unsure when an attempt failed. It is
// safe to repeat: an attempt after one that created the key finds the key
// holding this value's token (see acquired).
func (l *Locker) createOn(ctx context.Context, k, value []byte, sp *leaseInfo) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	err := l.call(ctx, func(ctx context.Context) (err error) {
		resp, err = l.createKey(ctx, k, value, sp.id)
		sp.unsure = sp.unsure || err != nil
		return err
	})
	return resp, err
}

// acquired returns the fence of the acquisition that TryLock's transaction resp
// made with token on the lease sp, and records in sp the revision of the put
// that put the key on it. When another acquisition holds the key it returns an
// error wrapping ErrLocked, keeps sp as a spare, and records the sighting for
// Wait.
func (l *Locker) acquired(key, token string, resp *clientv3.TxnResponse, sp *leaseInfo, start time.Time) (uint64, error) {
	if resp.Succeeded {
		sp.rev = resp.Header.Revision // the put's revision: the key's create revision
		return uint64(resp.Header.Revision), nil
	}
	var kv *mvccpb.KeyValue
	if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
		kv = r.Kvs[0]
	}
	if kv != nil && strings.HasPrefix(string(kv.Value), token+"\n") {
		// An earlier attempt, whose reply was lost, created the key.
		sp.rev = 0 // Unlock compares the create revision and the lease
		if clientv3.LeaseID(kv.Lease) == sp.id {
			sp.rev = kv.ModRevision
		}
		return uint64(kv.CreateRevision), nil
	}
	// The lease holds no key: keep it for the next attempt (unless an attempt
	// whose outcome is unknown may still put a key on it).
	l.putSpare(*sp)
	if kv == nil {
		return 0, fmt.Errorf("held by a key that is gone by now: %w", distlock.ErrLocked)
	}
	held, owner := parseValue(kv.Value)
	if kv.Lease == 0 {
		held = 0
	}
	l.see(key, sighting{rev: resp.Header.Revision, lease: kv.Lease, secs: held, at: start})
	return 0, fmt.Errorf("held by owner %s, fence %d: %w", driver.QuoteKey(owner), kv.CreateRevision, distlock.ErrLocked)
}

// refreshSpare refreshes the spare lease sp (KeepAliveOnce), which holds no key,
// and records its new TTL.
func (l *Locker) refreshSpare(ctx context.Context, sp *leaseInfo) error {
	at := time.Now()
	ttl, err := l.refresh(ctx, sp.id, true)
	if err != nil {
		return err
	}
	if err := refreshedInTime(sp.expiry()); err != nil {
		return err // it holds no key: let it expire
	}
	sp.at, sp.ttl = at, ttl
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
