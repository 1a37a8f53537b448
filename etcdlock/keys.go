package etcdlock

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdKey returns the etcd key that holds key's lock: the prefix and the encoded key.
func (l *Locker) etcdKey(key string) string {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '%' || c == '/' || c < 0x20 || c == 0x7f {
			return l.o.Prefix + encodeKey(key)
		}
	}
	return l.o.Prefix + key // nothing to encode: one allocation
}

// etcdKeyBytes is etcdKey(key) as a new []byte.
func (l *Locker) etcdKeyBytes(key string) []byte {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '%' || c == '/' || c < 0x20 || c == 0x7f {
			return []byte(l.o.Prefix + encodeKey(key))
		}
	}
	b := make([]byte, 0, len(l.o.Prefix)+len(key))
	return append(append(b, l.o.Prefix...), key...)
}

// encodeKey writes '%', '/' and ASCII control bytes of key as %XX and keeps every
// other byte.
func encodeKey(key string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c == '%' || c == '/' || c < 0x20 || c == 0x7f {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// valueBytes is what the lock key holds: the holder's token, the whole seconds of the ttl
// it asked for, and its owner label, separated by newlines. The token comes first
// and has a fixed length, so a comparison of the value with the token tells whether
// the token holds the key (see ownedBy).
func (l *Locker) valueBytes(token string, secs int64) []byte {
	b := make([]byte, 0, len(token)+22+len(l.o.Owner))
	b = append(b, token...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, secs, 10)
	b = append(b, '\n')
	return append(b, l.o.Owner...)
}

// parseValue splits a lock value into its ttl seconds and owner label.
func parseValue(v []byte) (secs int64, owner string) {
	parts := strings.SplitN(string(v), "\n", 3)
	if len(parts) != 3 {
		return 0, ""
	}
	secs, _ = strconv.ParseInt(parts[1], 10, 64)
	return secs, parts[2]
}

// valueFrom is the value v with its ttl seconds replaced by secs.
func valueFrom(v []byte, secs int64) string {
	token, _, _ := strings.Cut(string(v), "\n")
	_, owner := parseValue(v)
	return token + "\n" + strconv.FormatInt(secs, 10) + "\n" + owner
}

// tokenLen is the length of driver.NewToken's tokens (base32 of 128 bits).
const tokenLen = 26

// checkLease returns an error wrapping ErrInvalid when lease cannot be one that
// etcdlock issued, and one wrapping ErrNotHeld when its Fence is no etcd revision.
func checkLease(lease distlock.Lease) error {
	if err := driver.ValidateLease(lease); err != nil {
		return err
	}
	t := lease.Token
	ok := len(t) == tokenLen
	for i := 0; ok && i < len(t); i++ {
		c := t[i]
		ok = c >= 'A' && c <= 'Z' || c >= '2' && c <= '7'
	}
	if !ok {
		return fmt.Errorf("%w: Lease with a Token of %d bytes that etcdlock did not issue", distlock.ErrInvalid, len(t))
	}
	if lease.Fence == 0 || lease.Fence > math.MaxInt64 {
		return fmt.Errorf("%w: Lease with Fence %d, which is no etcd revision", distlock.ErrNotHeld, lease.Fence)
	}
	return nil
}

// ownedBy returns the comparisons that hold exactly when the lock key k was created
// at revision fence and still holds token: its create revision is fence, and its
// value lies strictly between token and token+"\xff", which (tokens being of one
// length, and the byte after the token being '\n') means it starts with token.
func ownedBy(k string, fence uint64, token string) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(k), "=", int64(fence)),
		clientv3.Compare(clientv3.Value(k), ">", token),
		clientv3.Compare(clientv3.Value(k), "<", token+"\xff"),
	}
}

// owns reports whether kv is the lock key of lease, as ownedBy checks on the server.
func owns(kv *mvccpb.KeyValue, lease distlock.Lease) bool {
	return kv != nil && uint64(kv.CreateRevision) == lease.Fence &&
		strings.HasPrefix(string(kv.Value), lease.Token+"\n")
}

// leaseSecs is ttl rounded up to whole seconds.
func leaseSecs(ttl time.Duration) int64 {
	return int64((ttl + time.Second - 1) / time.Second)
}

// checkTTL returns an error wrapping ErrInvalid when ttl is not positive or longer
// than MaxTTL.
func checkTTL(ttl time.Duration) error {
	if err := driver.ValidateTTL(ttl); err != nil {
		return err
	}
	if ttl > MaxTTL {
		return fmt.Errorf("%w: ttl %v is longer than etcd's largest lease TTL %v", distlock.ErrInvalid, ttl, MaxTTL)
	}
	return nil
}

// notHeld is the ErrNotHeld error of a key whose lock key now reads kvs.
func notHeld(kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		return fmt.Errorf("the key is not locked: %w", distlock.ErrNotHeld)
	}
	return fmt.Errorf("the key is held by another acquisition (fence %d): %w", kvs[0].CreateRevision, distlock.ErrNotHeld)
}
