package etcdlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Inspect reports key's holder: its Fence, its owner label, and an Expires of now
// plus the lease's remaining TTL as the server reports it (whole seconds, rounded
// down). It returns an error wrapping ErrNotHeld when key is free.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	start := time.Now()
	cctx, id, err := l.begin(ctx)
	if err != nil {
		return distlock.Holder{}, opError("Inspect", key, err)
	}
	defer l.end(id)
	h, err := l.inspect(cctx, key, start)
	if err != nil {
		return distlock.Holder{}, fail(cctx, "Inspect", key, err)
	}
	return h, nil
}

func (l *Locker) inspect(ctx context.Context, key string, start time.Time) (distlock.Holder, error) {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Holder{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Holder{}, err
	}
	get, err := l.get(ctx, l.etcdKey(key))
	if err != nil {
		return distlock.Holder{}, err
	}
	if len(get.Kvs) == 0 {
		return distlock.Holder{}, notHeld(nil)
	}
	kv := get.Kvs[0]
	_, owner := parseValue(kv.Value)
	h := distlock.Holder{Key: key, Fence: uint64(kv.CreateRevision), Owner: owner}
	if kv.Lease != 0 {
		var ttl *clientv3.LeaseTimeToLiveResponse
		err := l.call(ctx, func(ctx context.Context) (err error) {
			ttl, err = l.client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			return err
		})
		if err != nil {
			return distlock.Holder{}, err
		}
		if ttl.TTL < 0 {
			return distlock.Holder{}, fmt.Errorf("its lease expired: %w", distlock.ErrNotHeld)
		}
		h.Expires = start.Add(time.Duration(ttl.TTL) * time.Second)
	}
	return h, nil
}
