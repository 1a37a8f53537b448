package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// maxErrorLen bounds an error message: a key of any length must not flood a log line.
const maxErrorLen = 1024

// testOpErrors: every failed call returns a *distlock.OpError that names the backend
// (the same one every time), the operation and the key, wraps the cause, and keeps
// its message short whatever the key's length. Every call fails once on a short key
// and once on a key of 64 KiB (MaxKeyLen bytes when that is less); TryLock fails too
// on a key one byte over MaxKeyLen, when the backend has one.
func (s *suite) testOpErrors(t *testing.T) {
	a, b := s.client(t), s.client(t)
	c := &opErrorCheck{}
	s.failEveryOp(t, c, a, b, s.key(t), s.key(t))
	n := 64 << 10
	if m := s.h.Caps.MaxKeyLen; m > 0 && m < n {
		n = m
	}
	s.failEveryOp(t, c, a, b, s.keyOfLen(t, n), s.keyOfLen(t, n))
	if m := s.h.Caps.MaxKeyLen; m > 0 {
		over := strings.Repeat("k", m+1)
		_, err := b.TryLock(s.opCtx(t), over, s.long)
		c.check(t, "TryLock", over, err, distlock.ErrInvalid)
	}
}

// failEveryOp makes each call of b fail on key, which a holds, and Inspect on free:
// ErrLocked, ErrNotHeld for a forged lease, ErrInvalid for a zero ttl.
func (s *suite) failEveryOp(t *testing.T, c *opErrorCheck, a, b Client, key, free string) {
	t.Helper()
	la := s.lock(t, a, key, s.long, rErrors)
	defer s.unlock(t, a, la, rErrors)
	forged := distlock.Lease{Key: key, Token: driver.NewToken(), Fence: la.Fence, Expires: la.Expires}
	_, err := b.TryLock(s.opCtx(t), key, s.long)
	c.check(t, "TryLock", key, err, distlock.ErrLocked)
	_, err = b.Renew(s.opCtx(t), forged, s.long)
	c.check(t, "Renew", key, err, distlock.ErrNotHeld)
	c.check(t, "Unlock", key, b.Unlock(s.opCtx(t), forged), distlock.ErrNotHeld)
	_, err = b.TryLock(s.opCtx(t), key, 0)
	c.check(t, "TryLock", key, err, distlock.ErrInvalid)
	if w, ok := b.Locker.(distlock.Waiter); ok {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		c.check(t, "Wait", key, w.Wait(ctx, key), distlock.ErrLocked)
	}
	if in, ok := b.Locker.(distlock.Inspector); ok {
		_, err := in.Inspect(s.opCtx(t), free)
		c.check(t, "Inspect", free, err, distlock.ErrNotHeld)
	}
}

// keyOfLen returns a fresh key of n bytes.
func (s *suite) keyOfLen(t *testing.T, n int) string {
	prefix := s.key(t)
	return prefix + strings.Repeat("k", n-len(prefix))
}

// opErrorCheck judges failed calls; it remembers the first backend name it saw.
type opErrorCheck struct{ backend string }

// check fails t unless err wraps cause in an *OpError of op on key, named by the
// backend of every earlier check, with a message of at most maxErrorLen bytes.
func (c *opErrorCheck) check(t *testing.T, op, key string, err error, cause error) {
	t.Helper()
	if !errors.Is(err, cause) {
		t.Fatalf("%s: %s(%s): got %v, want an error wrapping %v", rErrors, op, short(key), err, cause)
	}
	var oe *distlock.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("%s: %s(%s) returned %T (%v), want a *distlock.OpError", rErrors, op, short(key), err, err)
	}
	if oe.Op != op || oe.Key != key || oe.Backend == "" {
		t.Fatalf("%s: %s(%s) returned OpError{Backend: %q, Op: %q, Key: %s}, want Op %q, that key and a backend name",
			rErrors, op, short(key), oe.Backend, oe.Op, short(oe.Key), op)
	}
	if c.backend == "" {
		c.backend = oe.Backend
	} else if oe.Backend != c.backend {
		t.Fatalf("%s: OpError.Backend is %q for %s and %q before", rErrors, oe.Backend, op, c.backend)
	}
	if n := len(err.Error()); n > maxErrorLen {
		t.Fatalf("%s: %s(%s): an error message of %d bytes (a key must be shortened in messages)", rErrors, op, short(key), n)
	}
}
