package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/go-sql-driver/mysql"
)

// A dialectCase makes Lockers of one dialect on one table; every Locker it makes
// shares the same database.
type dialectCase struct {
	name string
	new  func(t *testing.T, opts *Options) distlock.Locker
	// exec runs a statement directly on the database (for checks and setup).
	exec func(t *testing.T, query string, args ...any)
}

func dialects(t *testing.T) []dialectCase {
	path := filepath.Join(t.TempDir(), "locks.db")
	return []dialectCase{
		{
			name: "postgres",
			new:  func(t *testing.T, o *Options) distlock.Locker { return newPG(t, o) },
			exec: func(t *testing.T, q string, args ...any) {
				t.Helper()
				if _, err := pgPool(t, "").Exec(opCtx(t), q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			},
		},
		{
			name: "mariadb",
			new:  func(t *testing.T, o *Options) distlock.Locker { return newMy(t, o) },
			exec: func(t *testing.T, q string, args ...any) {
				t.Helper()
				if _, err := myDB(t, "", nil).ExecContext(opCtx(t), q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			},
		},
		{
			name: "sqlite",
			new:  func(t *testing.T, o *Options) distlock.Locker { return newLite(t, path, o) },
			exec: func(t *testing.T, q string, args ...any) {
				t.Helper()
				if _, err := sqliteDB(t, path).ExecContext(opCtx(t), q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			},
		},
	}
}

func TestOptions(t *testing.T) {
	bad := []string{
		"locks; DROP TABLE x",
		"locks\"; DROP TABLE x; --",
		"locks`; DROP TABLE x; --",
		"1locks",
		"lo-cks",
		"a.b.c",
		".locks",
		"locks.",
		"lócks",
		"locks\x00",
		strings.Repeat("l", 64),
	}
	for _, table := range bad {
		_, err := (&Options{Table: table}).resolve()
		if !errors.Is(err, distlock.ErrInvalid) || !strings.Contains(err.Error(), "Options.Table") {
			t.Errorf("Options{Table: %q}: got %v, want ErrInvalid naming Options.Table", table, err)
		}
	}
	good := map[string]string{
		"":                      `"distlock_leases"`,
		"locks":                 `"locks"`,
		"Locks_2":               `"Locks_2"`,
		"_x":                    `"_x"`,
		"app.locks":             `"app"."locks"`,
		strings.Repeat("l", 63): `"` + strings.Repeat("l", 63) + `"`,
	}
	for table, want := range good {
		r, err := (&Options{Table: table}).resolve()
		if err != nil {
			t.Errorf("Options{Table: %q}: %v", table, err)
			continue
		}
		if got := r.quoted(`"`); got != want {
			t.Errorf("Options{Table: %q} quoted = %s, want %s", table, got, want)
		}
	}
	for _, owner := range []string{strings.Repeat("o", 256), "bad\xff", "nul\x00"} {
		if _, err := (&Options{Owner: owner}).resolve(); !errors.Is(err, distlock.ErrInvalid) {
			t.Errorf("Options{Owner: %q}: got %v, want ErrInvalid", owner, err)
		}
	}
	r, err := (*Options)(nil).resolve()
	if err != nil || r.owner == "" || r.name() != DefaultTable {
		t.Errorf("nil Options: %+v, %v; want the default table and a hostname:pid owner", r, err)
	}
}

// TestBadTableNames: every constructor rejects a table name that is not an
// identifier with ErrInvalid, before sending anything to the database.
func TestBadTableNames(t *testing.T) {
	for _, dc := range dialects(t) {
		t.Run(dc.name, func(t *testing.T) {
			dc.exec(t, `CREATE TABLE IF NOT EXISTS victim (v INTEGER)`)
			for _, table := range []string{"locks; DROP TABLE victim", "locks; DROP TABLE victim; --", `x" (a int); DROP TABLE victim; --`} {
				var err error
				switch dc.name {
				case "postgres":
					_, err = NewPostgres(opCtx(t), pgPool(t, ""), &Options{Table: table})
				case "mariadb":
					_, err = NewMySQL(opCtx(t), myDB(t, "", nil), &Options{Table: table})
				case "sqlite":
					_, err = NewSQLite(opCtx(t), sqliteDB(t, filepath.Join(t.TempDir(), "x.db")), &Options{Table: table})
				}
				if !errors.Is(err, distlock.ErrInvalid) || !strings.Contains(err.Error(), strconv.Quote(table)) {
					t.Fatalf("Table %q: got %v, want ErrInvalid naming the table", table, err)
				}
			}
			dc.exec(t, `SELECT v FROM victim`) // still there
		})
	}
	if _, err := NewPostgres(opCtx(t), nil, nil); !errors.Is(err, distlock.ErrInvalid) {
		t.Errorf("NewPostgres(nil pool): %v, want ErrInvalid", err)
	}
	if _, err := NewMySQL(opCtx(t), nil, nil); !errors.Is(err, distlock.ErrInvalid) {
		t.Errorf("NewMySQL(nil db): %v, want ErrInvalid", err)
	}
	if _, err := NewSQLite(opCtx(t), nil, nil); !errors.Is(err, distlock.ErrInvalid) {
		t.Errorf("NewSQLite(nil db): %v, want ErrInvalid", err)
	}
}

// TestTableNames: quoted, case-sensitive and schema-qualified names work, and
// Lockers on different tables do not see each other's leases.
func TestTableNames(t *testing.T) {
	for _, dc := range dialects(t) {
		t.Run(dc.name, func(t *testing.T) {
			schema := map[string]string{"postgres": "app", "mariadb": "distlock", "sqlite": "main"}[dc.name]
			if dc.name == "postgres" {
				dc.exec(t, `CREATE SCHEMA IF NOT EXISTS app`)
			}
			tables := []string{"select", "Mixed_Case", schema + ".qualified"}
			var leases []distlock.Lease
			for _, table := range tables {
				l := dc.new(t, &Options{Table: table})
				if got := l.(interface{ Table() string }).Table(); got != table {
					t.Fatalf("Table() = %q, want %q", got, table)
				}
				lease, err := l.TryLock(opCtx(t), "same-key", time.Minute)
				if err != nil {
					t.Fatalf("table %q: TryLock: %v", table, err)
				}
				leases = append(leases, lease)
				defer func() {
					if err := l.Unlock(opCtx(t), lease); err != nil {
						t.Errorf("table %q: Unlock: %v", table, err)
					}
				}()
			}
			// The same key in the same table is still exclusive.
			l := dc.new(t, &Options{Table: tables[2]})
			if _, err := l.TryLock(opCtx(t), "same-key", time.Minute); !errors.Is(err, distlock.ErrLocked) {
				t.Fatalf("second TryLock in %q: %v, want ErrLocked", tables[2], err)
			}
		})
	}
}

// TestKeyBytes: keys are opaque bytes: NUL, invalid UTF-8, quotes, prefixes, case
// and the longest key are distinct locks; a key over MaxKeyLen is invalid.
func TestKeyBytes(t *testing.T) {
	keys := []string{
		"a", "A", "a\x00", "a\x00b", "\x00", "\xff\xfe", "a'b", `a"b`, "a`b", "a\\b",
		"a; DROP TABLE conformance", "a/b", "a b", "ключ", strings.Repeat("k", 1000),
		strings.Repeat("k", 1001), strings.Repeat("\x00", 64),
	}
	for _, dc := range dialects(t) {
		t.Run(dc.name, func(t *testing.T) {
			a, b := dc.new(t, &Options{Table: "keybytes"}), dc.new(t, &Options{Table: "keybytes"})
			var leases []distlock.Lease
			for _, k := range keys {
				k := k + distlock.NewToken()[:4] // fresh per run, still containing the bytes
				lease, err := a.TryLock(opCtx(t), k, time.Minute)
				if err != nil {
					t.Fatalf("TryLock(%q): %v (a distinct key must be free)", k, err)
				}
				if lease.Key != k || lease.Fence < 1 {
					t.Fatalf("TryLock(%q) = %+v", k, lease)
				}
				if _, err := b.TryLock(opCtx(t), k, time.Minute); !errors.Is(err, distlock.ErrLocked) {
					t.Fatalf("second TryLock(%q): %v, want ErrLocked", k, err)
				}
				h, err := b.(distlock.Inspector).Inspect(opCtx(t), k)
				if err != nil || h.Key != k || h.Fence != lease.Fence {
					t.Fatalf("Inspect(%q) = %+v, %v", k, h, err)
				}
				leases = append(leases, lease)
			}
			for _, lease := range leases {
				if _, err := a.Renew(opCtx(t), lease, time.Minute); err != nil {
					t.Fatalf("Renew(%q): %v", lease.Key, err)
				}
				if err := a.Unlock(opCtx(t), lease); err != nil {
					t.Fatalf("Unlock(%q): %v", lease.Key, err)
				}
			}
			long := strings.Repeat("\x00", MaxKeyLen-8) + distlock.NewToken()[:8]
			lease, err := a.TryLock(opCtx(t), long, time.Minute)
			if err != nil {
				t.Fatalf("TryLock of a %d-byte key: %v", len(long), err)
			}
			if err := a.Unlock(opCtx(t), lease); err != nil {
				t.Fatalf("Unlock of a %d-byte key: %v", len(long), err)
			}
			if _, err := a.TryLock(opCtx(t), long+"x", time.Minute); !errors.Is(err, distlock.ErrInvalid) {
				t.Fatalf("TryLock of a %d-byte key: %v, want ErrInvalid", len(long)+1, err)
			}
		})
	}
}

// TestHashCollision: a row whose key_hash matches but whose key differs (what a
// SHA-256 collision would give) is never taken over, renewed or released by the
// other key.
func TestHashCollision(t *testing.T) {
	for _, dc := range dialects(t) {
		t.Run(dc.name, func(t *testing.T) {
			l := dc.new(t, &Options{Table: "collision"})
			key := "collide-" + distlock.NewToken()
			// An expired row under key's hash, for another key.
			switch dc.name {
			case "postgres":
				dc.exec(t, `INSERT INTO "collision" VALUES ($1, $2, $3, 7, now() - interval '1 hour', 'x')`, keyHash(key), []byte("other"), []byte("tok"))
			case "mariadb":
				dc.exec(t, "INSERT INTO `collision` VALUES (?, ?, ?, 7, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, 'x')", keyHash(key), []byte("other"), []byte("tok"))
			case "sqlite":
				dc.exec(t, `INSERT INTO "collision" VALUES (?, ?, ?, 7, 0, 'x')`, keyHash(key), []byte("other"), []byte("tok"))
			}
			if _, err := l.TryLock(opCtx(t), key, time.Minute); err == nil {
				t.Fatal("TryLock took over a row that belongs to another key with the same hash")
			}
			if _, err := l.Renew(opCtx(t), distlock.Lease{Key: key, Token: "tok", Fence: 7}, time.Minute); !errors.Is(err, distlock.ErrNotHeld) {
				t.Fatalf("Renew through a colliding row: %v, want ErrNotHeld", err)
			}
			if _, err := l.(distlock.Inspector).Inspect(opCtx(t), key); !errors.Is(err, distlock.ErrNotHeld) {
				t.Fatalf("Inspect of a colliding row: %v, want ErrNotHeld", err)
			}
		})
	}
}

// TestOwnerAndRowsKept: Inspect reports the owner label; Unlock keeps the row, so
// the next fence follows the last one.
func TestOwnerAndRowsKept(t *testing.T) {
	for _, dc := range dialects(t) {
		t.Run(dc.name, func(t *testing.T) {
			a := dc.new(t, &Options{Table: "owners", Owner: "host-a/42 ✓"})
			b := dc.new(t, &Options{Table: "owners"})
			key := "owner-" + distlock.NewToken()
			var last uint64
			for i := range 3 {
				lease, err := a.TryLock(opCtx(t), key, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if lease.Fence != last+1 {
					t.Fatalf("acquisition %d: Fence %d, want %d", i, lease.Fence, last+1)
				}
				last = lease.Fence
				h, err := b.(distlock.Inspector).Inspect(opCtx(t), key)
				if err != nil {
					t.Fatal(err)
				}
				if h.Owner != "host-a/42 ✓" {
					t.Fatalf("Inspect Owner = %q", h.Owner)
				}
				if rem := time.Until(h.Expires); rem <= 50*time.Second || rem > time.Minute+time.Second {
					t.Fatalf("Inspect Expires in %v for a 1m lease", rem)
				}
				if err := a.Unlock(opCtx(t), lease); err != nil {
					t.Fatal(err)
				}
				if err := a.Unlock(opCtx(t), lease); !errors.Is(err, distlock.ErrNotHeld) {
					t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
				}
			}
		})
	}
}

// TestMySQLFoundRows: the acquire outcome does not depend on the DSN's
// clientFoundRows (which changes what rows affected means).
func TestMySQLFoundRows(t *testing.T) {
	for _, found := range []bool{false, true} {
		db := myDB(t, "", func(c *mysql.Config) { c.ClientFoundRows = found })
		l, err := NewMySQL(opCtx(t), db, &Options{Table: "foundrows"})
		if err != nil {
			t.Fatal(err)
		}
		key := "found-" + distlock.NewToken()
		la, err := l.TryLock(opCtx(t), key, 200*time.Millisecond)
		if err != nil || la.Fence != 1 {
			t.Fatalf("clientFoundRows=%v: first TryLock: %+v, %v", found, la, err)
		}
		if _, err := l.TryLock(opCtx(t), key, time.Minute); !errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("clientFoundRows=%v: TryLock of a held key: %v, want ErrLocked", found, err)
		}
		// Renew twice with the same ttl: the second may leave expires_at unchanged
		// only if both run within the same microsecond; either way it must succeed.
		for range 2 {
			if la, err = l.Renew(opCtx(t), la, 200*time.Millisecond); err != nil {
				t.Fatalf("clientFoundRows=%v: Renew: %v", found, err)
			}
		}
		time.Sleep(time.Until(la.Expires) + 10*time.Millisecond) // let the lease lapse
		lb, err := l.TryLock(opCtx(t), key, time.Minute)
		if err != nil || lb.Fence != 2 {
			t.Fatalf("clientFoundRows=%v: TryLock after expiry: %+v, %v; want Fence 2", found, lb, err)
		}
		if err := l.Unlock(opCtx(t), lb); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSQLiteNeedsBusyTimeout: NewSQLite refuses a database without a busy timeout.
func TestSQLiteNeedsBusyTimeout(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := NewSQLite(opCtx(t), db, nil); !errors.Is(err, distlock.ErrInvalid) || !strings.Contains(err.Error(), "busy_timeout") {
		t.Fatalf("NewSQLite without a busy timeout: %v, want ErrInvalid naming busy_timeout", err)
	}
}

// TestConcurrentCreate: Lockers created at once on a new table all work.
func TestConcurrentCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "create.db")
	for _, name := range []string{"postgres", "mariadb", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			opts := &Options{Table: "create_" + strings.ToLower(distlock.NewToken()[:8])}
			// Handles are made here: t.Fatal must not be called from the goroutines.
			news := make([]func() (distlock.Locker, error), 4)
			for i := range news {
				switch name {
				case "postgres":
					pool := pgPool(t, "")
					news[i] = func() (distlock.Locker, error) { return NewPostgres(opCtx(t), pool, opts) }
				case "mariadb":
					db := myDB(t, "", nil)
					news[i] = func() (distlock.Locker, error) { return NewMySQL(opCtx(t), db, opts) }
				case "sqlite":
					db := sqliteDB(t, path)
					news[i] = func() (distlock.Locker, error) { return NewSQLite(opCtx(t), db, opts) }
				}
			}
			ls := make([]distlock.Locker, len(news))
			errs := make([]error, len(news))
			var wg sync.WaitGroup
			for i, f := range news {
				wg.Go(func() { ls[i], errs[i] = f() })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("concurrent constructors: %v", err)
			}
			won := 0
			for _, l := range ls {
				if _, err := l.TryLock(opCtx(t), "k", time.Minute); err == nil {
					won++
				} else if !errors.Is(err, distlock.ErrLocked) {
					t.Fatal(err)
				}
			}
			if won != 1 {
				t.Fatalf("%d of %d Lockers acquired the same key", won, len(ls))
			}
		})
	}
}

// TestRetryGivesUp: a statement that keeps failing with a retryable error is tried
// maxAttempts times, and the caller's context ends the retries early.
func TestRetryGivesUp(t *testing.T) {
	l := &Locker{d: fakeDialect{}}
	n := 0
	err := l.retry(context.Background(), func() error { n++; return errRetry })
	if !errors.Is(err, errRetry) || n != maxAttempts {
		t.Fatalf("retry: %v after %d attempts, want errRetry after %d", err, n, maxAttempts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n = 0
	err = l.retry(ctx, func() error { n++; cancel(); return errRetry })
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("retry with a cancelled context: %v after %d attempts", err, n)
	}
}

var errRetry = errors.New("retry me")

type fakeDialect struct{ dialect }

func (fakeDialect) retryable(err error) bool { return errors.Is(err, errRetry) }
