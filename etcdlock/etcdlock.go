// Package etcdlock is a distlock backend on etcd v3 leases
// (go.etcd.io/etcd/client/v3).
//
// Each acquisition grants its own etcd lease and creates the lock key with it in one
// transaction that succeeds only if the key does not exist. The key lives exactly as
// long as the lease: Unlock deletes it, and the server deletes it when the lease
// expires, by the server's clock. The Fence is the key's create revision, which the
// cluster's revision makes strictly increasing, across clients, server restarts and
// leader changes.
//
// # Keys
//
// A key is stored as Options.Prefix followed by the key's bytes, with '%', '/' and
// the ASCII control bytes written as %XX. The mapping is one to one, so keys that
// differ in any byte are different locks, and an encoded key never contains '/', so
// a key cannot reach into a deeper prefix (a Locker with prefix "app/" never touches
// the keys of one with prefix "app/a/"). The etcd value holds the holder's secret
// token, the ttl it asked for and its owner label (Options.Owner), which Inspect
// reports.
//
// # Time to live
//
// etcd leases have a TTL in whole seconds, and the server raises a TTL below its
// minimum (3/2 of the election timeout rounded up: 2s with etcd's defaults, 1s with
// an election timeout of at most 666ms). A ttl is therefore rounded up to whole
// seconds for the lease, while Lease.Expires is the request's start plus the ttl
// asked for, never more. The key is freed at the latest when the lease expires:
// ttl rounded up (or the server's minimum), plus up to half a second for the
// server's expiry check. A leader change extends every lease: the new leader
// refreshes leases to their full TTL plus an election timeout.
//
// Renew with the ttl of the acquisition (same whole seconds) refreshes the lease
// (KeepAliveOnce). Renew with another ttl moves the key to a new lease of that ttl in
// one transaction, so that the key is freed by the new ttl; the Lease's Key, Token
// and Fence stay the same.
//
// # Round trips
//
// TryLock: two (LeaseGrant, Txn); one (Txn) when it uses the lease that the
// Locker's previous TryLock, which found a key held, kept (see TryLock).
// Renew: two (Range, LeaseKeepAlive); four when the ttl changes. Unlock: two (Txn,
// LeaseRevoke). Wait: a watch, which the Waits of a Locker on one key share and
// which stays for 2s after the last of them, and a Range unless a TryLock of the same
// Locker saw the key held since the watch started. Inspect: two (Range,
// LeaseTimeToLive).
//
// # Errors and cleanup
//
// A transport failure is returned as is (it never wraps ErrLocked). When a TryLock or
// Renew fails after its lease was granted (other than by finding the key held), the
// lease is revoked with a fresh context bounded by Options.CleanupTimeout (never the
// caller's, which may be the reason for the failure): revoking the lease removes a
// key that a request whose outcome is unknown may have created. The call waits for that cleanup only while the caller's
// context lives, so it still returns promptly when that context ends.
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
}

// A Locker acquires leases on keys in etcd through one clientv3.Client. It is safe
// for concurrent use. The zero value is not usable; call New.
type Locker struct {
	client  *clientv3.Client
	prefix  string
	owner   string
	cleanup time.Duration
	err     error // an invalid argument of New, returned by every call

	watchIdle time.Duration // watchIdle; tests shorten it

	mu       sync.Mutex
	lost     map[lostKey]chan struct{}
	sighting map[string]sighting  // what failed TryLocks saw, for Wait
	watches  map[string]*keyWatch // by key: the watches that Waits share
	spare    spare                // a failed TryLock's lease, for the next TryLock
}

// A spare is the lease of a TryLock that found the key held. It holds no key, so
// the Locker's next TryLock with the same whole seconds uses it instead of granting
// a lease (a round trip less on each attempt of a wait loop: Lock tries, waits,
// tries again), as long as it is young (spareMaxAge). A Locker keeps one; one it
// does not use holds nothing and expires on the server by its TTL.
type spare struct {
	id      clientv3.LeaseID // 0: none
	secs    int64            // the TTL asked for
	granted time.Duration    // the TTL granted (the server may raise it to its minimum)
	at      time.Time        // taken before the LeaseGrant request was sent
}

// spareMaxAge is the oldest spare lease that a TryLock for ttl uses: the lease's
// Expires counts from the grant (see TryLock), so the age is what the Lease may
// lose of ttl, beyond what the rounding up to whole seconds leaves: a tenth of ttl,
// at most a second.
func spareMaxAge(ttl time.Duration) time.Duration { return min(ttl/10, time.Second) }

// takeSpare returns the spare lease if it fits a TryLock of secs and ttl that
// started at start; it revokes, in the background, one that no TryLock could use
// any longer.
func (l *Locker) takeSpare(secs int64, ttl time.Duration, start time.Time) (spare, bool) {
	l.mu.Lock()
	sp := l.spare
	if sp.id == 0 {
		l.mu.Unlock()
		return spare{}, false
	}
	age := start.Sub(sp.at)
	if sp.secs == secs && age <= spareMaxAge(ttl) {
		l.spare = spare{}
		l.mu.Unlock()
		return sp, true
	}
	stale := age > time.Second // too old for any ttl
	if stale {
		l.spare = spare{}
	}
	l.mu.Unlock()
	if stale {
		l.revokeLater(sp.id)
	}
	return spare{}, false
}

// putSpare keeps sp as the spare lease, revoking the one it replaces in the
// background.
func (l *Locker) putSpare(sp spare) {
	l.mu.Lock()
	old := l.spare
	l.spare = sp
	l.mu.Unlock()
	if old.id != 0 && old.id != sp.id {
		l.revokeLater(old.id)
	}
}

// A sighting is what a TryLock that found key held saw: the revision of its reply,
// at which the key existed, and the holder's lease. A Wait whose watch of the key
// started at or before that revision needs no request to check that the key is
// held: the watch saw every deletion since.
type sighting struct {
	rev   int64     // the revision of the reply that showed the key held
	lease int64     // the holder's etcd lease ID (0: none)
	secs  int64     // the holder's ttl in whole seconds, from its value
	at    time.Time // taken before the request that saw it was sent
}

// Bounds of the sightings a Locker keeps.
const (
	// sightingMaxAge is how long a sighting serves Wait: its time bounds the wait
	// for the holder's ttl, which an old sighting would make needlessly short.
	sightingMaxAge = 2 * time.Second
	// maxSightings bounds the map: beyond it, old sightings are dropped.
	maxSightings = 1024
)

// see records that key was seen held at rev by a request sent at at.
func (l *Locker) see(key string, s sighting) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.sighting) >= maxSightings {
		for k, old := range l.sighting {
			if s.at.Sub(old.at) > sightingMaxAge || len(l.sighting) >= maxSightings {
				delete(l.sighting, k)
			}
		}
	}
	l.sighting[key] = s
}

// sightingOf returns a recent sighting of key, if there is one.
func (l *Locker) sightingOf(key string) (sighting, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sighting[key]
	if ok && time.Since(s.at) > sightingMaxAge {
		delete(l.sighting, key)
		return sighting{}, false
	}
	return s, ok
}

var (
	_ distlock.Locker       = (*Locker)(nil)
	_ distlock.Waiter       = (*Locker)(nil)
	_ distlock.Inspector    = (*Locker)(nil)
	_ distlock.LossNotifier = (*Locker)(nil)
)

// New returns a Locker that uses client, which the caller keeps and closes (close it
// only after the Locker's last call). Invalid arguments (a nil client, a negative
// CleanupTimeout) are not reported here: every call of the Locker returns an error
// wrapping distlock.ErrInvalid that names them.
func New(client *clientv3.Client, opts *Options) *Locker {
	var o Options
	if opts != nil {
		o = *opts
	}
	l := &Locker{client: client, prefix: o.Prefix, owner: o.Owner, cleanup: o.CleanupTimeout,
		lost: make(map[lostKey]chan struct{}), sighting: make(map[string]sighting), watches: make(map[string]*keyWatch),
		watchIdle: watchIdle}
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
	case l.cleanup == 0:
		l.cleanup = DefaultCleanupTimeout
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
			grant, err := l.client.Grant(ctx, secs)
			if err != nil {
				// If the grant reached the server, its lease has no key and expires alone.
				return distlock.Lease{}, fmt.Errorf("etcdlock: TryLock(%q): grant a lease of %ds: %w", key, secs, err)
			}
			sp = spare{id: grant.ID, secs: secs, granted: time.Duration(grant.TTL) * time.Second, at: start}
		}
		resp, err := l.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, l.value(token, secs), clientv3.WithLease(sp.id))).
			Else(clientv3.OpGet(k)).
			Commit()
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
		if !resp.Succeeded {
			// The lease holds no key: keep it for the next attempt.
			l.putSpare(sp)
			holder := "a key that is gone by now"
			if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
				kv := r.Kvs[0]
				held, owner := parseValue(kv.Value)
				holder = fmt.Sprintf("owner %q, fence %d", owner, kv.CreateRevision)
				l.see(key, sighting{rev: resp.Header.Revision, lease: kv.Lease, secs: held, at: start})
			}
			return distlock.Lease{}, fmt.Errorf("etcdlock: key %q is held (%s): %w", key, holder, distlock.ErrLocked)
		}
		return distlock.Lease{
			Key:   key,
			Token: token,
			Fence: uint64(resp.Header.Revision), // the put's revision: the key's create revision
			// The server frees the key no sooner than the lease's grant plus its
			// TTL (whole seconds, at least ttl): for a fresh grant that is after
			// start + ttl; for a spare lease it may come sooner.
			Expires: minTime(start.Add(ttl), sp.at.Add(sp.granted)),
		}, nil
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Renew extends lease to ttl from now. With the acquisition's ttl (in whole seconds)
// it refreshes the lease; with another ttl it moves the key to a new lease of that
// ttl. It returns an error wrapping ErrNotHeld when the key is gone, was taken by
// another acquisition, or its lease expired.
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
	get, err := l.client.Get(ctx, k)
	if err != nil {
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): %w", lease.Key, err)
	}
	if len(get.Kvs) == 0 || !owns(get.Kvs[0], lease) {
		return distlock.Lease{}, notHeld(lease.Key, get.Kvs)
	}
	kv := get.Kvs[0]
	old := clientv3.LeaseID(kv.Lease)
	secs := leaseSecs(ttl)
	if held, _ := parseValue(kv.Value); held == secs {
		if _, err := l.client.KeepAliveOnce(ctx, old); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): the lease expired: %w", lease.Key, distlock.ErrNotHeld)
			}
			return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): %w", lease.Key, err)
		}
		lease.Expires = start.Add(ttl)
		return lease, nil
	}

	// Another ttl: move the key to a new lease of that ttl, keeping its create
	// revision (the Fence) and token.
	grant, err := l.client.Grant(ctx, secs)
	if err != nil {
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): grant a lease of %ds: %w", lease.Key, secs, err)
	}
	resp, err := l.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", kv.CreateRevision),
			clientv3.Compare(clientv3.Value(k), "=", string(kv.Value)),
			clientv3.Compare(clientv3.LeaseValue(k), "=", old)).
		Then(clientv3.OpPut(k, l.valueFrom(kv.Value, secs), clientv3.WithLease(grant.ID))).
		Commit()
	if err != nil {
		// Unknown outcome: the key may be on the new lease or still on the old one.
		// Revoking either could free a key the caller may still hold until the old
		// Expires, so both are left to expire by their ttl.
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): %w", lease.Key, err)
	}
	if !resp.Succeeded {
		l.revoke(ctx, grant.ID)
		return distlock.Lease{}, fmt.Errorf("etcdlock: Renew(%q): the key changed or its lease expired: %w", lease.Key, distlock.ErrNotHeld)
	}
	l.revoke(ctx, old) // it holds no key now
	lease.Expires = start.Add(ttl)
	return lease, nil
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
	resp, err := l.client.Txn(ctx).
		If(ownedBy(k, lease.Fence, lease.Token)...).
		Then(clientv3.OpDelete(k, clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return fmt.Errorf("etcdlock: Unlock(%q): %w", lease.Key, err)
	}
	if !resp.Succeeded {
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
		_, _ = l.client.Revoke(rctx, id)
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
		_, _ = l.client.Revoke(rctx, id)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Inspect reports key's holder: its Fence, its owner label, and an Expires of now
// plus the lease's remaining TTL as the server reports it (whole seconds, rounded
// down). It returns an error wrapping ErrNotHeld when key is free.
func (l *Locker) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	if l.err != nil {
		return distlock.Holder{}, l.err
	}
	if err := distlock.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Holder{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Holder{}, fmt.Errorf("etcdlock: Inspect(%q): %w", key, err)
	}
	start := time.Now()
	get, err := l.client.Get(ctx, l.EtcdKey(key))
	if err != nil {
		return distlock.Holder{}, fmt.Errorf("etcdlock: Inspect(%q): %w", key, err)
	}
	if len(get.Kvs) == 0 {
		return distlock.Holder{}, fmt.Errorf("etcdlock: key %q is not locked: %w", key, distlock.ErrNotHeld)
	}
	kv := get.Kvs[0]
	_, owner := parseValue(kv.Value)
	h := distlock.Holder{Key: key, Fence: uint64(kv.CreateRevision), Owner: owner}
	if kv.Lease != 0 {
		ttl, err := l.client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			return distlock.Holder{}, fmt.Errorf("etcdlock: Inspect(%q): %w", key, err)
		}
		if ttl.TTL < 0 {
			return distlock.Holder{}, fmt.Errorf("etcdlock: key %q: its lease expired: %w", key, distlock.ErrNotHeld)
		}
		h.Expires = start.Add(time.Duration(ttl.TTL) * time.Second)
	}
	return h, nil
}

// lostKey identifies one acquisition.
type lostKey struct {
	key   string
	fence uint64
}

// Lost returns a channel that is closed when the server shows that lease's
// acquisition has ended: its key was deleted (Unlock, or the lease expired or was
// revoked) or created anew. It watches the key, from the revision after the Fence,
// until then or until the client is closed; calls for one acquisition share one
// watch. A renewal, which may move the key to another lease, keeps the channel
// open. It returns nil for a Lease that etcdlock did not issue.
func (l *Locker) Lost(lease distlock.Lease) <-chan struct{} {
	if l.err != nil || distlock.ValidateLease(lease) != nil || checkToken(lease) != nil {
		return nil
	}
	lk := lostKey{lease.Key, lease.Fence}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch, ok := l.lost[lk]; ok {
		return ch
	}
	ch := make(chan struct{})
	l.lost[lk] = ch
	go l.watchLoss(lk, ch)
	return ch
}

// watchLoss closes ch once the acquisition lk ended, and forgets it.
func (l *Locker) watchLoss(lk lostKey, ch chan struct{}) {
	ended := l.awaitLoss(lk)
	l.mu.Lock()
	delete(l.lost, lk)
	l.mu.Unlock()
	if ended {
		close(ch)
	}
}

// awaitLoss watches the key of lk and reports true once the acquisition ended, or
// false when it can no longer tell (the client was closed).
func (l *Locker) awaitLoss(lk lostKey) bool {
	k := l.EtcdKey(lk.key)
	rev := int64(lk.fence) + 1
	for {
		ended, next, ok := l.watchFrom(k, lk.fence, rev)
		if !ok || ended {
			return ended
		}
		rev = next
	}
}

// watchFrom watches k from rev until the acquisition with create revision fence
// ended (ended), the watch's history was compacted (ok, and next is the revision to
// watch from), or the watch failed or the client was closed (!ok).
func (l *Locker) watchFrom(k string, fence uint64, rev int64) (ended bool, next int64, ok bool) {
	ctx, cancel := context.WithCancel(l.client.Ctx())
	defer cancel()
	for resp := range l.client.Watch(ctx, k, clientv3.WithRev(rev)) {
		if resp.CompactRevision != 0 {
			// History since rev is gone: read the key's state instead.
			gctx, gcancel := context.WithTimeout(ctx, l.cleanup)
			get, err := l.client.Get(gctx, k)
			gcancel()
			if err != nil {
				return false, 0, false
			}
			if len(get.Kvs) == 0 || uint64(get.Kvs[0].CreateRevision) != fence {
				return true, 0, true
			}
			return false, get.Header.Revision + 1, true
		}
		if resp.Err() != nil {
			return false, 0, false
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete || uint64(ev.Kv.CreateRevision) != fence {
				return true, 0, true
			}
		}
	}
	return false, 0, false // the client was closed
}
