package distlock

import (
	"strconv"
	"strings"
	"unicode/utf8"
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
		b.WriteString(QuoteKey(e.Key))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// MaxKeyInMessage is how many bytes of a key QuoteKey (and so OpError) shows.
const MaxKeyInMessage = 64

// QuoteKey returns key quoted for a message: Go-quoted (so any byte is visible and
// safe), cut to MaxKeyInMessage bytes at a character boundary, and followed by its
// length when it was cut.
func QuoteKey(key string) string {
	head, cut := cutKey(key)
	if !cut {
		return strconv.Quote(key)
	}
	return strconv.Quote(head) + "...(" + strconv.Itoa(len(key)) + " bytes)"
}

// cutKey returns key's first MaxKeyInMessage bytes, cut at a character boundary, and
// whether that dropped anything.
func cutKey(key string) (string, bool) {
	if len(key) <= MaxKeyInMessage {
		return key, false
	}
	cut := MaxKeyInMessage
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return key[:cut], true
}

// logKey is key for a log attribute: unquoted (the handler quotes), and cut like
// QuoteKey's.
func logKey(key string) string {
	head, cut := cutKey(key)
	if !cut {
		return key
	}
	return head + "...(" + strconv.Itoa(len(key)) + " bytes)"
}
