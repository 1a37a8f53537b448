package redisx

import (
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// Limits and defaults that both backends share (each re-exports them under its own
// name).
const (
	// MaxKeyLen is the longest key, in bytes. A key is stored in full in the names of
	// its lock key, its fence key and its release channel, and the fence key is never
	// deleted, so the limit also bounds what a key costs in server memory.
	MaxKeyLen = 8 << 10
	// MaxOwnerLen is the longest owner label, in bytes.
	MaxOwnerLen = 256
	// DefaultCleanupTimeout bounds the fresh context that removes a half-made lock
	// after a call whose outcome is unknown.
	DefaultCleanupTimeout = 5 * time.Second
)

// Common are the options both backends share. Fill validates them and fills in
// their defaults.
type Common struct {
	Prefix         string
	Owner          string
	CleanupTimeout time.Duration
}

// Fill fills the zero fields of c (the prefix with defaultPrefix, the owner with
// driver.DefaultOwner, the cleanup timeout with DefaultCleanupTimeout), or returns
// an error wrapping distlock.ErrInvalid that names the first bad option: a Prefix
// with '{' or '}' (it would change the keys' Cluster hash tag), an Owner over
// MaxOwnerLen bytes, a negative CleanupTimeout.
func (c *Common) Fill(defaultPrefix string) error {
	if c.Prefix == "" {
		c.Prefix = defaultPrefix
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		return fmt.Errorf("%w: Options.Prefix %s contains '{' or '}'", distlock.ErrInvalid, driver.QuoteKey(c.Prefix))
	}
	if c.Owner == "" {
		c.Owner = driver.DefaultOwner()
	}
	if len(c.Owner) > MaxOwnerLen {
		return fmt.Errorf("%w: Options.Owner of %d bytes is longer than %d bytes", distlock.ErrInvalid, len(c.Owner), MaxOwnerLen)
	}
	if c.CleanupTimeout < 0 {
		return fmt.Errorf("%w: Options.CleanupTimeout %v is negative", distlock.ErrInvalid, c.CleanupTimeout)
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = DefaultCleanupTimeout
	}
	return nil
}

// Millis returns ttl in whole milliseconds, rounded up: the server must never free
// a key before the client's Expires.
func Millis(ttl time.Duration) int64 {
	ms := int64(ttl / time.Millisecond)
	if ttl%time.Millisecond != 0 {
		ms++
	}
	return ms
}
