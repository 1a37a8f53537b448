package conformance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// expectInvalid fails the test unless err wraps ErrInvalid and its message mentions
// every one of names (case-insensitive).
func expectInvalid(t *testing.T, err error, what string, names ...string) {
	t.Helper()
	if !errors.Is(err, distlock.ErrInvalid) {
		t.Fatalf("%s: %s: got %v, want an error wrapping ErrInvalid", rInput, what, err)
	}
	for _, n := range names {
		if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(n)) {
			t.Fatalf("%s: %s: the message %q does not name the bad value (%q)", rInput, what, err, n)
		}
	}
}

// testBadArguments: empty key, ttl <= 0, oversized key and zero Lease give ErrInvalid
// naming the bad value.
func (s *suite) testBadArguments(t *testing.T) {
	a := s.client(t)
	key := s.key(t)
	_, err := a.TryLock(s.opCtx(t), "", s.long)
	expectInvalid(t, err, `TryLock("")`, "key")
	for _, ttl := range []time.Duration{0, -time.Second, -1} {
		_, err := a.TryLock(s.opCtx(t), key, ttl)
		expectInvalid(t, err, "TryLock with ttl "+ttl.String(), "ttl", ttl.String())
	}
	if n := s.h.Caps.MaxKeyLen; n > 0 {
		_, err := a.TryLock(s.opCtx(t), strings.Repeat("k", n+1), s.long)
		expectInvalid(t, err, "TryLock with a key one byte over MaxKeyLen", "key")
	}
	_, err = a.Renew(s.opCtx(t), distlock.Lease{}, s.long)
	expectInvalid(t, err, "Renew of the zero Lease", "lease")
	expectInvalid(t, a.Unlock(s.opCtx(t), distlock.Lease{}), "Unlock of the zero Lease", "lease")
	la := s.lock(t, a, key, s.long, rInput)
	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err := a.Renew(s.opCtx(t), la, ttl)
		expectInvalid(t, err, "Renew with ttl "+ttl.String(), "ttl", ttl.String())
	}
	if w, ok := a.Locker.(distlock.Waiter); ok {
		expectInvalid(t, w.Wait(s.opCtx(t), ""), `Wait("")`, "key")
	}
	if in, ok := a.Locker.(distlock.Inspector); ok {
		_, err := in.Inspect(s.opCtx(t), "")
		expectInvalid(t, err, `Inspect("")`, "key")
	}
	s.unlock(t, a, la, rInput) // the invalid Renew calls changed nothing
}

// testLongestKey: a key of exactly MaxKeyLen bytes (64 KiB when unlimited) works.
func (s *suite) testLongestKey(t *testing.T) {
	a, b := s.client(t), s.client(t)
	n := s.h.Caps.MaxKeyLen
	if n == 0 {
		n = 64 << 10
	}
	prefix := s.key(t)
	key := prefix + strings.Repeat("\xff", n-len(prefix))
	// The rule is that the longest key works, not how fast: a key of a megabyte
	// takes a database longer to write than OpTimeout allows a usual call.
	big := *s
	big.op = 5 * s.op
	la := big.lock(t, a, key, s.long, rInput)
	big.expectLocked(t, b, key, rInput, "for the longest key while it is held")
	// A key that differs only in its last byte is another lock.
	other := key[:n-1] + "\xfe"
	lo := big.lock(t, b, other, s.long, rInput)
	big.unlock(t, b, lo, rInput)
	big.unlock(t, a, la, rInput)
}

// distinctKeys differ in case, separators, braces, NUL, encoding and escaping: a
// backend that maps keys into paths, hash tags, URLs or SQL must keep them apart.
var distinctKeys = []string{
	"a", "A", "a/b", "a/", "/a", "a//b", "a%2Fb", "a%2fb", "a b", "a\tb", "a\nb", "a ",
	"{a}", "{a", "a}", "{}", "a:lock", "a:fence", "a.lock", "*", "?", "..", "../a", ".",
	"a\x00b", "a\x00", "\x00", "ключ", "🔒", "\u00e9", "e\u0301", "\xff\xfe", "\xff",
	"'; DROP TABLE locks; --", `"a"`, "\\", "a.b", "a_b", "a-b", "%s", "$1", "?1",
}

// testDistinctKeys: keys that differ in any byte are different locks.
func (s *suite) testDistinctKeys(t *testing.T) {
	a, b := s.client(t), s.client(t)
	prefix := s.key(t) + "-"
	leases := make([]distlock.Lease, 0, len(distinctKeys))
	for _, k := range distinctKeys {
		key := prefix + k
		lease, err := a.TryLock(s.opCtx(t), key, s.long)
		if err != nil {
			t.Fatalf("%s: TryLock(%q) while %d other distinct keys are held: %v (two distinct keys map to one lock, or a legal key is refused)", rInput, key, len(leases), err)
		}
		if lease.Key != key {
			t.Fatalf("%s: TryLock(%q) returned a Lease for %q", rLease, key, lease.Key)
		}
		leases = append(leases, lease)
	}
	// Bare keys too, with no prefix: the backend's own namespace must hold them.
	for _, k := range []string{"\x00", "/", "{", "}"} {
		lease, err := a.TryLock(s.opCtx(t), k, s.ttl)
		if err == nil {
			_ = a.Unlock(s.opCtx(t), lease)
		} else if !errors.Is(err, distlock.ErrLocked) { // another run may hold it
			t.Fatalf("%s: TryLock(%q): %v", rInput, k, err)
		}
	}
	for _, l := range leases {
		s.expectLocked(t, b, l.Key, rInput, "while held (distinct keys)")
	}
	for _, l := range leases {
		s.unlock(t, a, l, rInput)
	}
	lb := s.lock(t, b, prefix+distinctKeys[0], s.long, rInput)
	s.unlock(t, b, lb, rInput)
}
