package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
)

// BenchmarkTryLockUnlock measures an uncontended TryLock followed by Unlock of one
// key on a database file.
func BenchmarkTryLockUnlock(b *testing.B) {
	l, _ := newClient(b, filepath.Join(b.TempDir(), "bench.db"), &sqllock.Options{Table: "bench"})
	sqltest.BenchTryLockUnlock(b, l)
}
