package driver

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/keytext"
)

// ValidateKey returns an error wrapping distlock.ErrInvalid when key is empty or
// longer than maxLen bytes (maxLen <= 0 means no limit). Backends call it first in
// TryLock, Wait and Inspect.
func ValidateKey(key string, maxLen int) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", distlock.ErrInvalid)
	}
	if maxLen > 0 && len(key) > maxLen {
		return fmt.Errorf("%w: key of %d bytes is longer than the limit of %d bytes", distlock.ErrInvalid, len(key), maxLen)
	}
	return nil
}

// ValidateTTL returns an error wrapping distlock.ErrInvalid when ttl <= 0.
func ValidateTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %v is not positive", distlock.ErrInvalid, ttl)
	}
	return nil
}

// ValidateLease returns an error wrapping distlock.ErrInvalid when lease cannot have
// come from a TryLock: it is zero, or its Key or Token is empty.
func ValidateLease(lease distlock.Lease) error {
	switch {
	case lease.IsZero():
		return fmt.Errorf("%w: zero Lease", distlock.ErrInvalid)
	case lease.Key == "":
		return fmt.Errorf("%w: Lease with an empty Key", distlock.ErrInvalid)
	case lease.Token == "":
		return fmt.Errorf("%w: Lease for key %s with an empty Token", distlock.ErrInvalid, QuoteKey(lease.Key))
	}
	return nil
}

// NewToken returns a fresh random token of 128 bits from crypto/rand, as 26
// characters of base32 (letters and digits only, safe in any key or path).
func NewToken() string { return rand.Text() }

// DefaultOwner returns the owner label backends use when none is configured:
// "<hostname>:<pid>", with "unknown-host" when the hostname cannot be read.
func DefaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// MaxKeyInMessage is how many bytes of a key QuoteKey (and distlock.OpError's
// message) shows.
const MaxKeyInMessage = keytext.Max

// QuoteKey returns key quoted for a message: Go-quoted (so any byte is visible and
// safe), cut to MaxKeyInMessage bytes at a character boundary, and followed by its
// length when it was cut. distlock.OpError's message quotes its key the same way.
func QuoteKey(key string) string { return keytext.Quote(key) }
