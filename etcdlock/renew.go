package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// gone, was taken by another acquisition, or its lease expired.
//
// It first reads the key, linearizably: a member cut off from the quorum cannot
// answer, so a holder whose client reaches only such a member cannot renew.
func (l *Locker) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	if l.err != nil {
		return distlock.Lease{}, l.err
	}
	if err := distlock.ValidateLease(lease); err != nil {
		return distlock.Lease{}, err
	}
	if err := l.checkTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := checkToken(lease); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): %w", lease.Key, err)
	}
	start := time.Now()
	k := l.EtcdKey(lease.Key)
	get, err := l.get(ctx, k)
	if err != nil {
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): %w", lease.Key, err)
	}
	if len(get.Kvs) == 0 || !owns(get.Kvs[0], lease) {
		return distlock.Lease{}, notHeld(lease.Key, get.Kvs)
	}
	kv := get.Kvs[0]
	secs := leaseSecs(ttl)
	// The value records the seconds the key's lease was granted with (the server
	// may have raised them, never lowered).
	if held, _ := parseValue(kv.Value); secs <= held {
		return l.refresh(ctx, lease, clientv3.LeaseID(kv.Lease), start, ttl)
	}
	return l.move(ctx, lease, kv, start, ttl)
}

// refresh renews lease by refreshing its etcd lease id (KeepAliveOnce), which
// holds the key for its full TTL, at least ttl.
func (l *Locker) refresh(ctx context.Context, lease distlock.Lease, id clientv3.LeaseID, start time.Time, ttl time.Duration) (distlock.Lease, error) {
	var ka *clientv3.LeaseKeepAliveResponse
	err := l.call(ctx, func(ctx context.Context) (err error) {
		ka, err = l.client.KeepAliveOnce(ctx, id)
		return err
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): the lease expired: %w", lease.Key, distlock.ErrNotHeld)
	}
	if err != nil {
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): %w", lease.Key, err)
	}
	// The server refreshed the lease to its TTL after start.
	lease.Expires = start.Add(min(ttl, time.Duration(ka.TTL)*time.Second))
	return renewed(lease, start, ttl)
}

// renewed returns lease, or an error (not ErrNotHeld: the server holds the key)
// when its new Expires has passed already: the renewal took longer than ttl.
func renewed(lease distlock.Lease, start time.Time, ttl time.Duration) (distlock.Lease, error) {
	if !time.Now().Before(lease.Expires) {
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): the renewal took %v, longer than the ttl %v", lease.Key, time.Since(start), ttl)
	}
	return lease, nil
}

// move renews lease for a ttl longer than its etcd lease's TTL: it grants a lease
// of ttl and moves the key kv to it in one transaction, keeping its create
// revision (the Fence) and token, then revokes the old lease.
func (l *Locker) move(ctx context.Context, lease distlock.Lease, kv *mvccpb.KeyValue, start time.Time, ttl time.Duration) (distlock.Lease, error) {
	k, old, secs := string(kv.Key), clientv3.LeaseID(kv.Lease), leaseSecs(ttl)
	var grant *clientv3.LeaseGrantResponse
	err := l.call(ctx, func(ctx context.Context) (err error) {
		grant, err = l.client.Grant(ctx, secs)
		return err
	})
	if err != nil {
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): grant a lease of %ds: %w", lease.Key, secs, err)
	}
	value := l.valueFrom(kv.Value, secs)
	// Safe to repeat: an attempt after one that moved the key finds it on the new
	// lease (below).
	var resp *clientv3.TxnResponse
	err = l.call(ctx, func(ctx context.Context) (err error) {
		resp, err = l.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", kv.CreateRevision),
				clientv3.Compare(clientv3.Value(k), "=", string(kv.Value)),
				clientv3.Compare(clientv3.LeaseValue(k), "=", old)).
			Then(clientv3.OpPut(k, value, clientv3.WithLease(grant.ID))).
			Else(clientv3.OpGet(k)).
			Commit()
		return err
	})
	if err != nil {
		// Unknown outcome: the key may be on the new lease or still on the old one,
		// each of which holds it past the old Expires. Revoking either could free
		// a key the caller may still hold, so both are left to expire by their ttl.
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): %w", lease.Key, err)
	}
	if !resp.Succeeded && !movedTo(resp, kv.CreateRevision, value, grant.ID) {
		l.revoke(ctx, grant.ID)
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): the key changed or its lease expired: %w", lease.Key, distlock.ErrNotHeld)
	}
	l.revoke(ctx, old) // it holds no key now
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

// valueFrom is the value v with its ttl seconds replaced by secs.
func (l *Locker) valueFrom(v []byte, secs int64) string {
	token, _, _ := strings.Cut(string(v), "\n")
	_, owner := parseValue(v)
	return token + "\n" + strconv.FormatInt(secs, 10) + "\n" + owner
}

// notHeld is the ErrNotHeld error for key, whose lock key now reads kvs.
func notHeld(key string, kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		return fmt.Errorf("etcdlock: key %q is not locked: %w", key, distlock.ErrNotHeld)
	}
	return fmt.Errorf("etcdlock: key %q is held by another acquisition (fence %d): %w", key, kvs[0].CreateRevision, distlock.ErrNotHeld)
}
