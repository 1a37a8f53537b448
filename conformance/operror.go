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
// its message short whatever the key's length.
func (s *suite) testOpErrors(t *testing.T) {
	a, b := s.client(t), s.client(t)
	key := s.key(t)
	la := s.lock(t, a, key, s.long, rErrors)
	defer s.unlock(t, a, la, rErrors)
	forged := distlock.Lease{Key: key, Token: driver.NewToken(), Fence: la.Fence, Expires: la.Expires}
	backend := ""
	check := func(op, key string, err error, cause error) {
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
		if backend == "" {
			backend = oe.Backend
		} else if oe.Backend != backend {
			t.Fatalf("%s: OpError.Backend is %q for %s and %q before", rErrors, oe.Backend, op, backend)
		}
		if n := len(err.Error()); n > maxErrorLen {
			t.Fatalf("%s: %s(%s): an error message of %d bytes (a key must be shortened in messages)", rErrors, op, short(key), n)
		}
	}
	_, err := b.TryLock(s.opCtx(t), key, s.long)
	check("TryLock", key, err, distlock.ErrLocked)
	_, err = b.Renew(s.opCtx(t), forged, s.long)
	check("Renew", key, err, distlock.ErrNotHeld)
	check("Unlock", key, b.Unlock(s.opCtx(t), forged), distlock.ErrNotHeld)
	_, err = b.TryLock(s.opCtx(t), key, 0)
	check("TryLock", key, err, distlock.ErrInvalid)
	if w, ok := b.Locker.(distlock.Waiter); ok {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		check("Wait", key, w.Wait(ctx, key), distlock.ErrLocked)
	}
	if in, ok := b.Locker.(distlock.Inspector); ok {
		free := s.key(t)
		_, err := in.Inspect(s.opCtx(t), free)
		check("Inspect", free, err, distlock.ErrNotHeld)
	}
	long := strings.Repeat("k", 1<<16)
	if m := s.h.Caps.MaxKeyLen; m > 0 {
		long = strings.Repeat("k", m+1)
		_, err := b.TryLock(s.opCtx(t), long, s.long)
		check("TryLock", long, err, distlock.ErrInvalid)
	}
}
