package sqllock

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// Limits and defaults.
const (
	// DefaultTable is the table that holds the lease rows when Options.Table is
	// empty.
	DefaultTable = "distlock_leases"
	// MaxKeyLen is the longest key, in bytes, that a Locker accepts. Longer keys
	// give an error wrapping distlock.ErrInvalid. The key is stored whole (next to
	// its SHA-256, which is the primary key), so that two keys never share a row.
	MaxKeyLen = 1 << 20
	// MaxOwnerLen is the longest Options.Owner, in bytes (the MySQL column is
	// VARCHAR(255)).
	MaxOwnerLen = 255
	// DefaultCleanupTimeout bounds the release of a half-made lock (see
	// Options.CleanupTimeout).
	DefaultCleanupTimeout = 5 * time.Second
	// DefaultEndSessionTimeout bounds the ending of an abandoned statement's
	// database session (see Options.EndSessionTimeout).
	DefaultEndSessionTimeout = 5 * time.Second
)

// Options configure a Locker. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Table is the table that holds one row per key. It must be an identifier that
	// matches ^[A-Za-z_][A-Za-z0-9_]{0,62}$, optionally qualified by a schema (or an
	// attached SQLite database) that matches the same pattern: "locks" or
	// "app.locks". It is quoted in every statement, so it is case-sensitive. Any
	// other name gives an error wrapping distlock.ErrInvalid; a name is never built
	// into SQL unchecked. Default DefaultTable. Every Locker that shares a lock must
	// use the same table.
	Table string
	// Owner labels the leases of this Locker; Inspect reports it as Holder.Owner. It
	// must be valid UTF-8 without NUL bytes, at most MaxOwnerLen bytes. Default
	// driver.DefaultOwner() ("hostname:pid"), cut to MaxOwnerLen bytes.
	Owner string
	// SkipCreateTable stops the constructor from creating the table (CREATE TABLE
	// IF NOT EXISTS), for schemas managed by migrations: create it with the
	// dialect package's DDL before. The constructor still adds the table's fence
	// high-water row if it is missing (see Locker.Prune), and fails when the table
	// is not there.
	SkipCreateTable bool
	// CleanupTimeout bounds the release of the row that a TryLock may have taken
	// when its outcome is unknown (its context ended, its connection broke) or its
	// lease had expired before the reply came. The release runs in the background
	// with a fresh context, never the caller's, which may be the reason for the
	// failure; Close waits for it. Default DefaultCleanupTimeout; it must not be
	// negative.
	CleanupTimeout time.Duration
	// EndSessionTimeout bounds the ending of the database session that an abandoned
	// TryLock's statement was sent on, which comes before the release (see the
	// package doc, "Abandoned acquires"). Default DefaultEndSessionTimeout; it must
	// not be negative.
	EndSessionTimeout time.Duration
}

// identPart is one part of a table name.
var identPart = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// WithDefaults returns a copy of o with its zero fields filled in, or an error
// wrapping distlock.ErrInvalid that names the bad option. It is for the dialect
// packages, which call it before they build their statements.
func (o *Options) WithDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Table == "" {
		r.Table = DefaultTable
	}
	parts := strings.Split(r.Table, ".")
	if len(parts) > 2 {
		return r, fmt.Errorf("%w: Options.Table %q has more than one '.' (want table or schema.table)", distlock.ErrInvalid, r.Table)
	}
	for _, p := range parts {
		if !identPart.MatchString(p) {
			return r, fmt.Errorf("%w: Options.Table %q is not an identifier (each part must match %s)", distlock.ErrInvalid, r.Table, identPart)
		}
	}
	if r.Owner == "" {
		owner := driver.DefaultOwner()
		if len(owner) > MaxOwnerLen {
			owner = owner[:MaxOwnerLen]
		}
		r.Owner = strings.ToValidUTF8(strings.ReplaceAll(owner, "\x00", ""), "?")
	}
	switch {
	case len(r.Owner) > MaxOwnerLen:
		return r, fmt.Errorf("%w: Options.Owner of %d bytes is longer than %d bytes", distlock.ErrInvalid, len(r.Owner), MaxOwnerLen)
	case !utf8.ValidString(r.Owner):
		return r, fmt.Errorf("%w: Options.Owner %q is not valid UTF-8", distlock.ErrInvalid, r.Owner)
	case strings.ContainsRune(r.Owner, 0):
		return r, fmt.Errorf("%w: Options.Owner %q contains a NUL byte", distlock.ErrInvalid, r.Owner)
	case r.CleanupTimeout < 0:
		return r, fmt.Errorf("%w: Options.CleanupTimeout %v is negative", distlock.ErrInvalid, r.CleanupTimeout)
	case r.EndSessionTimeout < 0:
		return r, fmt.Errorf("%w: Options.EndSessionTimeout %v is negative", distlock.ErrInvalid, r.EndSessionTimeout)
	}
	if r.CleanupTimeout == 0 {
		r.CleanupTimeout = DefaultCleanupTimeout
	}
	if r.EndSessionTimeout == 0 {
		r.EndSessionTimeout = DefaultEndSessionTimeout
	}
	return r, nil
}
