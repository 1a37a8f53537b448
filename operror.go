package distlock

import (
	"strings"

	"github.com/distlock/distlock/internal/keytext"
)

// An OpError is the error every backend returns when a call fails: which backend,
// which operation, on which key, and why. Test the cause with errors.Is (ErrLocked,
// ErrNotHeld, ErrInvalid, ErrClosed, a context error); read the details with
// errors.As:
//
//	var oe *distlock.OpError
//	if errors.As(err, &oe) {
//		log.Printf("%s %s failed on %q", oe.Backend, oe.Op, oe.Key)
//	}
type OpError struct {
	Backend string // the backend's package name: "redislock", "etcdlock", ...
	Op      string // the method that failed: "TryLock", "Renew", "Unlock", "Wait", "Inspect", "New", ...
	Key     string // the key, in full ("" when the call has none); Error shortens it
	Err     error  // the cause
}

// Error returns "<backend>: <op> <key>: <cause>", with the key quoted and cut to
// MaxKeyInMessage bytes, so that a long key never floods a log line.
func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString(e.Backend)
	b.WriteString(": ")
	b.WriteString(e.Op)
	if e.Key != "" {
		b.WriteByte(' ')
		b.WriteString(keytext.Quote(e.Key))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }
