package etcdlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Unlock releases lease: in one transaction it deletes the key if the key still
// holds lease (same create revision, same token); that is its only round trip.
// When this Locker made the acquisition, the transaction compares the key with
// what the Locker recorded (the revision of the put that put it on its etcd lease:
// one comparison), and that lease, which holds no key now, becomes a spare for the
// Locker's next TryLock. Otherwise (the
// Lease came from another Locker, or another Locker's Renew moved the key) it
// compares the token and revokes the key's lease in the background. It returns
// an error wrapping ErrNotHeld, and changes nothing, when the key does not hold
// lease.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	cctx, id, err := l.begin(ctx)
	if err != nil {
		return opError("Unlock", lease.Key, err)
	}
	defer l.end(id)
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
	k, lk := l.etcdKey(lease.Key), lostKey{lease.Key, lease.Fence}
	// The recorded acquisition is the lease's only when the token is its (a forged
	// or mistaken Lease can carry the key and fence of another).
	if h, ok := l.heldOf(lk); ok && h.token == lease.Token {
		if done, err := l.unlockHeld(ctx, k, lk, lease, h); done {
			return err
		}
	}
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
		return notHeldNow(unknown)
	}
	l.forget(lk)
	l.endLoss(k, lease.Fence)
	if d := resp.Responses[0].GetResponseDeleteRange(); d != nil && len(d.PrevKvs) > 0 && d.PrevKvs[0].Lease != 0 {
		l.revokeLater(clientv3.LeaseID(d.PrevKvs[0].Lease)) // not known to hold nothing else
	}
	return nil
}

// unlockHeld is Unlock of an acquisition that this Locker recorded (h), whose
// token Unlock checked against the recorded one: it deletes the key only if it
// still holds what the Locker recorded (see deleteKey: its mod revision is that
// of the put that put it on h), which needs no PrevKV to tell which lease becomes
// a spare. The value needs no comparison (one read less on the server): the
// create revision fixes the token, and only a Renew that moves the key to a new
// lease changes the rest of the value. When the key holds lease otherwise
// (another Locker renewed it onto another lease) it reports !done, and Unlock
// goes on with the owner check by token.
func (l *Locker) unlockHeld(ctx context.Context, k string, lk lostKey, lease distlock.Lease, h leaseInfo) (done bool, err error) {
	var resp *clientv3.TxnResponse
	unknown := false // an attempt failed after it may have deleted the key
	err = l.call(ctx, func(ctx context.Context) (err error) {
		resp, err = l.deleteKey(ctx, k, int64(lease.Fence), h)
		unknown = unknown || err != nil
		return err
	})
	if err != nil {
		return true, err
	}
	if resp.Succeeded {
		l.released(lk, k, h) // h holds no key now: a spare
		return true, nil
	}
	// Rare: a read tells why (no Else read in the transaction, whose every
	// Unlock would build and send it). Once the key does not hold lease it
	// never does again (the create revision is the Fence).
	get, err := l.get(ctx, k)
	if err != nil {
		return true, err
	}
	if len(get.Kvs) > 0 && owns(get.Kvs[0], lease) {
		return false, nil
	}
	// The acquisition is over; its lease held no other key.
	l.forget(lk)
	l.endLoss(k, lease.Fence)
	l.revokeLater(h.id)
	return true, notHeldNow(unknown)
}

// notHeldNow is Unlock's error when the key is not held by the lease; unknown says
// that an earlier attempt, whose reply was lost, may have deleted it.
func notHeldNow(unknown bool) error {
	if unknown {
		return fmt.Errorf("the key is not held by this lease (an attempt whose reply was lost may have released it): %w", distlock.ErrNotHeld)
	}
	return fmt.Errorf("the key is not held by this lease: %w", distlock.ErrNotHeld)
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
