package sqllock

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/distlock/distlock"
)

// DefaultTable is the table that holds the lease rows when Options.Table is empty.
const DefaultTable = "distlock_leases"

// MaxKeyLen is the longest key, in bytes, that a Locker accepts. Longer keys give an
// error wrapping distlock.ErrInvalid. The key is stored whole (next to its SHA-256,
// which is the primary key), so that two keys never share a row.
const MaxKeyLen = 1 << 20

// maxOwnerLen is the longest Options.Owner in bytes (the MySQL column is VARCHAR(255)).
const maxOwnerLen = 255

// Options configure a Locker. A nil *Options means the defaults.
type Options struct {
	// Table is the table that holds one row per key. It must be an identifier that
	// matches ^[A-Za-z_][A-Za-z0-9_]{0,62}$, optionally qualified by a schema (or an
	// attached SQLite database) that matches the same pattern: "locks" or
	// "app.locks". It is quoted in every statement, so it is case-sensitive. Any
	// other name gives an error wrapping distlock.ErrInvalid; a name is never built
	// into SQL unchecked. Empty means DefaultTable. The constructor creates the table
	// if it is missing. Every Locker that shares a lock must use the same table.
	Table string
	// Owner labels the leases of this Locker; Inspect reports it as Holder.Owner. It
	// must be valid UTF-8 without NUL bytes, at most 255 bytes. Empty means
	// "hostname:pid".
	Owner string
}

// identPart is one part of a table name.
var identPart = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// resolved are validated options: the table split into its parts, and the owner.
type resolved struct {
	table []string // one part, or schema and table
	owner string
}

// resolve validates o and fills in the defaults.
func (o *Options) resolve() (resolved, error) {
	var r resolved
	var opts Options
	if o != nil {
		opts = *o
	}
	table := opts.Table
	if table == "" {
		table = DefaultTable
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return r, fmt.Errorf("%w: Options.Table %q has more than one '.' (want table or schema.table)", distlock.ErrInvalid, table)
	}
	for _, p := range parts {
		if !identPart.MatchString(p) {
			return r, fmt.Errorf("%w: Options.Table %q is not an identifier (each part must match %s)", distlock.ErrInvalid, table, identPart)
		}
	}
	r.table = parts
	owner := opts.Owner
	if owner == "" {
		owner = distlock.DefaultOwner()
		if len(owner) > maxOwnerLen {
			owner = owner[:maxOwnerLen]
		}
		owner = strings.ToValidUTF8(strings.ReplaceAll(owner, "\x00", ""), "?")
	}
	switch {
	case len(owner) > maxOwnerLen:
		return r, fmt.Errorf("%w: Options.Owner of %d bytes is longer than %d bytes", distlock.ErrInvalid, len(owner), maxOwnerLen)
	case !utf8.ValidString(owner):
		return r, fmt.Errorf("%w: Options.Owner %q is not valid UTF-8", distlock.ErrInvalid, owner)
	case strings.ContainsRune(owner, 0):
		return r, fmt.Errorf("%w: Options.Owner %q contains a NUL byte", distlock.ErrInvalid, owner)
	}
	r.owner = owner
	return r, nil
}

// quoted returns the table name with each part quoted by q (a double quote for
// PostgreSQL and SQLite, a backtick for MySQL). The parts are validated identifiers,
// so they contain no quote characters.
func (r resolved) quoted(q string) string {
	qs := make([]string, len(r.table))
	for i, p := range r.table {
		qs[i] = q + p + q
	}
	return strings.Join(qs, ".")
}

// name returns the table name as given.
func (r resolved) name() string { return strings.Join(r.table, ".") }
