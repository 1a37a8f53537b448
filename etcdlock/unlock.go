package etcdlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Unlock releases lease: in one transaction it deletes the key if the key still
// holds lease (same create revision, same token); that is its only round trip. The
// key's etcd lease, which holds no key now, becomes a spare for the Locker's next
// TryLock when this Locker granted it; otherwise (or when the pool is full) it is
// revoked in the background. It returns an error wrapping ErrNotHeld, and changes
// nothing, when the key does not hold lease.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	cctx, end, err := l.begin(ctx)
	if err != nil {
		return opError("Unlock", lease.Key, err)
	}
	defer end()
	if err := l.unlock(cctx, lease); err != nil {
		return fail(cctx, "Unlock", lease.Key, err)
	}
	return nil
}

func (l *Locker) unlock(ctx context.Context, lease distlock.Lease) error {
	if err := checkLease(lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	k := l.EtcdKey(lease.Key)
	var resp *clientv3.TxnResponse
	unknown := false // an attempt failed after it may have deleted the key
	err := l.call(ctx, func(ctx context.Context) (err error) {
		resp, err = l.client.Txn(ctx).
			If(ownedBy(k, lease.Fence, lease.Token)...).
			Then(clientv3.OpDelete(k, clientv3.WithPrevKV())).
			Commit()
		unknown = unknown || err != nil
		return err
	})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		if unknown {
			return fmt.Errorf("the key is not held by this lease (an attempt whose reply was lost may have released it): %w", distlock.ErrNotHeld)
		}
		return fmt.Errorf("the key is not held by this lease: %w", distlock.ErrNotHeld)
	}
	if d := resp.Responses[0].GetResponseDeleteRange(); d != nil && len(d.PrevKvs) > 0 && d.PrevKvs[0].Lease != 0 {
		l.released(clientv3.LeaseID(d.PrevKvs[0].Lease))
	}
	return nil
}

// revokeLater revokes the lease id in the background, bounded by the cleanup
// timeout (and ended at once if the client is closed). It must be called during a
// call (see spawn).
func (l *Locker) revokeLater(id clientv3.LeaseID) {
	l.spawn(func() {
		rctx, cancel := context.WithTimeout(context.Background(), l.o.CleanupTimeout)
		defer cancel()
		l.revokeNow(rctx, id)
	})
}

// revoke revokes the lease id with a fresh context bounded by the cleanup timeout,
// during a call whose context is ctx. It waits for the revocation only while ctx
// lives: when ctx ends first (the caller's context ended, or Close was called),
// the revocation goes on in the background, still bounded (and ended at once if
// the client is closed); Close waits for it. Errors are ignored: a lease that is
// not revoked expires by its ttl.
func (l *Locker) revoke(ctx context.Context, id clientv3.LeaseID) {
	done := make(chan struct{})
	l.spawn(func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.o.CleanupTimeout)
		defer cancel()
		l.revokeNow(rctx, id)
	})
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// revokeNow revokes the lease id, retrying until ctx ends. Errors are ignored: a
// lease that is not revoked expires by its ttl, and one that is gone already
// (ErrLeaseNotFound, which is not retried) needs nothing.
func (l *Locker) revokeNow(ctx context.Context, id clientv3.LeaseID) {
	_ = l.call(ctx, func(ctx context.Context) error {
		_, err := l.client.Revoke(ctx, id)
		return err
	})
}
