package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// Inspect returns the holder of key: the lowest lock node, its czxid as Fence and its
// data as Owner (for another library's lock node, whatever that library stores).
// ZooKeeper locks have no ttl on the server, so Expires is an estimate: now + this
// client's granted session timeout, the soonest the key would free itself if its
// holder (with a session like this client's) died now. It returns an error wrapping
// distlock.ErrNotHeld when the key is free. Errors are *distlock.OpError.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	fail := func(err error) (distlock.Holder, error) {
		return distlock.Holder{}, opError("Inspect", key, err)
	}
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if l.isClosed() {
		return fail(distlock.ErrClosed)
	}
	keyPath := l.keyPath(key)
	h, err := call(ctx, func() (distlock.Holder, error) {
		for {
			children, _, err := l.conn.Children(keyPath)
			if errors.Is(err, zk.ErrNoNode) {
				return distlock.Holder{}, fmt.Errorf("no lock node: %w", distlock.ErrNotHeld)
			}
			if err != nil {
				return distlock.Holder{}, err
			}
			low, ok := lowest(children)
			if !ok {
				return distlock.Holder{}, fmt.Errorf("no lock node: %w", distlock.ErrNotHeld)
			}
			data, stat, err := l.conn.Get(keyPath + "/" + low.name)
			if errors.Is(err, zk.ErrNoNode) {
				continue // released meanwhile: look again
			}
			if err != nil {
				return distlock.Holder{}, err
			}
			return distlock.Holder{
				Key:     key,
				Fence:   uint64(stat.Czxid),
				Expires: time.Now().Add(l.sess.Timeout()),
				Owner:   string(data),
			}, nil
		}
	})
	if err != nil {
		return fail(err)
	}
	return h, nil
}
