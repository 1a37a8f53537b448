package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MaxKeyLen is the longest key, in bytes, that a Locker accepts. Its encoding may be
// up to three times longer; etcd's default request limit (1.5 MiB) leaves room.
const MaxKeyLen = 1 << 16

// MaxTTL is the longest ttl a Locker accepts: etcd's largest lease TTL.
const MaxTTL = 9_000_000_000 * time.Second

// DefaultPrefix is the key prefix of a Locker whose Options.Prefix is empty.
const DefaultPrefix = "distlock/"

// DefaultCleanupTimeout bounds the revocation of a failed attempt's lease.
const DefaultCleanupTimeout = 5 * time.Second

// Options configure a Locker. A nil *Options means the defaults.
type Options struct {
	// Prefix is prepended to every key; it must not be shared with other data.
	// Default DefaultPrefix. A '/' is appended when it does not end with one.
	Prefix string
	// Owner labels the holder for Inspect (Holder.Owner). Default "hostname:pid".
	Owner string
	// CleanupTimeout bounds the revocation of a failed attempt's lease, which runs
	// with a fresh context. Default DefaultCleanupTimeout; it must not be negative.
	CleanupTimeout time.Duration
	// RequestTimeout bounds each attempt of a request to etcd. An attempt that
	// times out, or that a member cannot serve now (it has no leader, its
	// connection broke), is tried again, on the client's next endpoint, until the
	// call's context ends. Keep it well above the cluster's request latency under
	// load, and near its election time: a write that a member forwarded to a
	// leader that died is lost, and only another attempt completes it. Default
	// DefaultRequestTimeout; it must not be negative.
	RequestTimeout time.Duration
}

// A Locker acquires leases on keys in etcd through one clientv3.Client. It is safe
// for concurrent use. The zero value is not usable; call New.
type Locker struct {
	client  *clientv3.Client
	prefix  string
	owner   string
	cleanup time.Duration
	// reqTimeout bounds each attempt of a request (Options.RequestTimeout).
	reqTimeout time.Duration
	err        error // an invalid argument of New, returned by every call

	watchIdle time.Duration // watchIdle; tests shorten it

	mu       sync.Mutex
	lost     map[lostKey]chan struct{}
	sighting map[string]sighting  // what failed TryLocks saw, for Wait
	watches  map[string]*keyWatch // by key: the watches that Waits share
	spare    spare                // a failed TryLock's lease, for the next TryLock
}

var (
	_ distlock.Locker       = (*Locker)(nil)
	_ distlock.Waiter       = (*Locker)(nil)
	_ distlock.Inspector    = (*Locker)(nil)
	_ distlock.LossNotifier = (*Locker)(nil)
)

// New returns a Locker that uses client, which the caller keeps and closes (close it
// only after the Locker's last call). Invalid arguments (a nil client, a negative
// CleanupTimeout or RequestTimeout) are not reported here: every call of the
// Locker returns an error wrapping distlock.ErrInvalid that names them.
func New(client *clientv3.Client, opts *Options) *Locker {
	var o Options
	if opts != nil {
		o = *opts
	}
	l := &Locker{client: client, prefix: o.Prefix, owner: o.Owner, cleanup: o.CleanupTimeout,
		reqTimeout: o.RequestTimeout, watchIdle: watchIdle,
		lost: make(map[lostKey]chan struct{}), sighting: make(map[string]sighting), watches: make(map[string]*keyWatch)}
	if l.prefix == "" {
		l.prefix = DefaultPrefix
	}
	if !strings.HasSuffix(l.prefix, "/") {
		l.prefix += "/"
	}
	if l.owner == "" {
		l.owner = distlock.DefaultOwner()
	}
	switch {
	case client == nil:
		l.err = fmt.Errorf("%w: etcdlock.New: nil *clientv3.Client", distlock.ErrInvalid)
	case l.cleanup < 0:
		l.err = fmt.Errorf("%w: etcdlock.New: negative Options.CleanupTimeout %v", distlock.ErrInvalid, l.cleanup)
	case l.reqTimeout < 0:
		l.err = fmt.Errorf("%w: etcdlock.New: negative Options.RequestTimeout %v", distlock.ErrInvalid, l.reqTimeout)
	}
	if l.cleanup == 0 {
		l.cleanup = DefaultCleanupTimeout
	}
	if l.reqTimeout == 0 {
		l.reqTimeout = DefaultRequestTimeout
	}
	return l
}

// EtcdKey returns the etcd key that holds key's lock: the prefix and the encoded key.
func (l *Locker) EtcdKey(key string) string { return l.prefix + encodeKey(key) }

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

// value is what the lock key holds: the holder's token, the whole seconds of the ttl
// it asked for, and its owner label, separated by newlines. The token comes first
// and has a fixed length, so a comparison of the value with the token tells whether
// the token holds the key (see ownedBy).
func (l *Locker) value(token string, secs int64) string {
	return token + "\n" + strconv.FormatInt(secs, 10) + "\n" + l.owner
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

// tokenLen is the length of distlock.NewToken's tokens (base32 of 128 bits).
const tokenLen = 26

// checkToken returns an error wrapping ErrInvalid when token cannot be one of ours.
func checkToken(lease distlock.Lease) error {
	t := lease.Token
	ok := len(t) == tokenLen
	for i := 0; ok && i < len(t); i++ {
		c := t[i]
		ok = c >= 'A' && c <= 'Z' || c >= '2' && c <= '7'
	}
	if !ok {
		return fmt.Errorf("%w: Lease for key %q has a Token of %d bytes that etcdlock did not issue", distlock.ErrInvalid, lease.Key, len(t))
	}
	if lease.Fence == 0 || lease.Fence > math.MaxInt64 {
		return fmt.Errorf("%w: Lease for key %q has Fence %d, which is no etcd revision", distlock.ErrNotHeld, lease.Key, lease.Fence)
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

func (l *Locker) checkTTL(ttl time.Duration) error {
	if err := distlock.ValidateTTL(ttl); err != nil {
		return err
	}
	if ttl > MaxTTL {
		return fmt.Errorf("%w: ttl %v is longer than etcd's largest lease TTL %v", distlock.ErrInvalid, ttl, MaxTTL)
	}
	return nil
}

// TryLock makes one attempt to acquire key for ttl: it grants a lease of ttl rounded
// up to whole seconds and, in one transaction, creates the key with it if the key
// does not exist. It returns an error wrapping ErrLocked when another lease holds the
// key; it then keeps its lease, which holds no key, for the Locker's next TryLock
// with the same whole seconds, which uses it instead of granting one if it is at
// most a tenth of ttl old (and at most a second). The Lease's Expires is then
// counted from that grant: the time taken before the LeaseGrant request was sent,
// plus the lease's TTL, if that comes before this call's start plus ttl. When the
// attempt fails otherwise, TryLock revokes its lease.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if l.err != nil {
		return distlock.Lease{}, l.err
	}
	if err := distlock.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := l.checkTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, fmt.Errorf("etcdlock: TryLock(%q): %w", key, err)
	}
	start := time.Now()
	secs := leaseSecs(ttl)
	k := l.EtcdKey(key)
	token := distlock.NewToken()
	sp, reused := l.takeSpare(secs, ttl, start)
	for {
		if !reused {
			var grant *clientv3.LeaseGrantResponse
			err := l.call(ctx, func(ctx context.Context) (err error) {
				grant, err = l.client.Grant(ctx, secs)
				return err
			})
			if err != nil {
				// If a grant reached the server, its lease has no key and expires alone.
				return distlock.Lease{}, fmt.Errorf("etcdlock: TryLock(%q): grant a lease of %ds: %w", key, secs, err)
			}
			sp = spare{id: grant.ID, secs: secs, granted: time.Duration(grant.TTL) * time.Second, at: start}
		}
		// Safe to repeat: an attempt after one that created the key finds the key
		// holding this token (below).
		var resp *clientv3.TxnResponse
		err := l.call(ctx, func(ctx context.Context) (err error) {
			resp, err = l.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, l.value(token, secs), clientv3.WithLease(sp.id))).
				Else(clientv3.OpGet(k)).
				Commit()
			return err
		})
		if err != nil && reused && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// The spare lease is gone (revoked from outside): grant one.
			reused = false
			continue
		}
		if err != nil {
			// The key may have been created: revoking the lease removes it.
			l.revoke(ctx, sp.id)
			return distlock.Lease{}, fmt.Errorf("etcdlock: TryLock(%q): %w", key, err)
		}
		fence := uint64(resp.Header.Revision) // the put's revision: the key's create revision
		if !resp.Succeeded {
			var kv *mvccpb.KeyValue
			if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
				kv = r.Kvs[0]
			}
			if kv == nil || !strings.HasPrefix(string(kv.Value), token+"\n") {
				// The lease holds no key: keep it for the next attempt.
				l.putSpare(sp)
				holder := "a key that is gone by now"
				if kv != nil {
					held, owner := parseValue(kv.Value)
					holder = fmt.Sprintf("owner %q, fence %d", owner, kv.CreateRevision)
					l.see(key, sighting{rev: resp.Header.Revision, lease: kv.Lease, secs: held, at: start})
				}
				return distlock.Lease{}, fmt.Errorf("etcdlock: key %q is held (%s): %w", key, holder, distlock.ErrLocked)
			}
			// An earlier attempt, whose reply was lost, created the key.
			fence = uint64(kv.CreateRevision)
		}
		// The server frees the key no sooner than the lease's grant plus its TTL
		// (whole seconds, at least ttl): for a fresh grant that is after start +
		// ttl; for a spare lease it may come sooner.
		expires := minTime(start.Add(ttl), sp.at.Add(sp.granted))
		if !time.Now().Before(expires) {
			// Too late to be of use: free the key rather than hold it for nobody.
			l.revoke(ctx, sp.id)
			return distlock.Lease{}, fmt.Errorf("etcdlock: TryLock(%q): the key was created, but the attempt took %v, longer than the ttl %v; released it", key, time.Since(start), ttl)
		}
		return distlock.Lease{Key: key, Token: token, Fence: fence, Expires: expires}, nil
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Unlock releases lease: in one transaction it deletes the key if the key still
// holds lease (same create revision, same token), then revokes the key's lease. It
// returns an error wrapping ErrNotHeld, and changes nothing, when the key does not.
func (l *Locker) Unlock(ctx context.Context, lease distlock.Lease) error {
	if l.err != nil {
		return l.err
	}
	if err := distlock.ValidateLease(lease); err != nil {
		return err
	}
	if err := checkToken(lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("etcdlock: Unlock(%q): %w", lease.Key, err)
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
		return fmt.Errorf("etcdlock: Unlock(%q): %w", lease.Key, err)
	}
	if !resp.Succeeded {
		if unknown {
			return fmt.Errorf("etcdlock: Unlock(%q): the key is not held by this lease (an attempt whose reply was lost may have released it): %w", lease.Key, distlock.ErrNotHeld)
		}
		return fmt.Errorf("etcdlock: Unlock(%q): the key is not held by this lease: %w", lease.Key, distlock.ErrNotHeld)
	}
	if d := resp.Responses[0].GetResponseDeleteRange(); d != nil && len(d.PrevKvs) > 0 && d.PrevKvs[0].Lease != 0 {
		l.revoke(ctx, clientv3.LeaseID(d.PrevKvs[0].Lease))
	}
	return nil
}

// revokeLater revokes the lease id in the background, bounded by the cleanup
// timeout (and ended at once if the client is closed).
func (l *Locker) revokeLater(id clientv3.LeaseID) {
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), l.cleanup)
		defer cancel()
		l.revokeNow(rctx, id)
	}()
}

// revoke revokes the lease id with a fresh context bounded by the cleanup timeout. It
// waits for the revocation only while ctx lives: when ctx ends first, the revocation
// goes on in the background, still bounded (and ended at once if the client is
// closed). Errors are ignored: a lease that is not revoked expires by its ttl.
func (l *Locker) revoke(ctx context.Context, id clientv3.LeaseID) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cleanup)
		defer cancel()
		l.revokeNow(rctx, id)
	}()
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
