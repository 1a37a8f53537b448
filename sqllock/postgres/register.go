package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Unlock notifies only when some Wait may be waiting for the key: NOTIFY makes
// PostgreSQL serialize the commits of all notifying transactions on one lock, and
// Unlocks of distinct keys that no Wait needs must not serialize on it. A
// Locker's Waits register a key on their listening connection: a session-level
// shared advisory lock (tableID, keyID). Unlock's statement tries the same lock
// exclusively, for its transaction: when a Wait holds it the try fails and Unlock
// notifies. A Wait registers, and only then reads the row: if the Unlock's try
// came first, its exclusive lock keeps the registration waiting until the Unlock
// has committed, and the read sees the released row; otherwise the Unlock sees
// the registration and notifies, and the connection was listening before it
// registered. A registration stays for listenIdle after the key's last Wait
// returned, so that a wait loop registers once; it holds one entry of the
// server's lock table.
const (
	registerSQL   = `SELECT count(pg_advisory_lock_shared($1::int4, k)) FROM unnest($2::int4[]) AS k`
	unregisterSQL = `SELECT count(pg_advisory_unlock_shared($1::int4, k)) FROM unnest($2::int4[]) AS k`
)

// A reg is the registration of the Waits of one key on a listening connection.
type reg struct {
	key   int32         // keyID
	ready chan struct{} // closed once the lock is held (held), or failed (err)
	err   error
	held  bool      // guarded by listener.mu
	users int       // the Waits of the key on the connection; guarded by listener.mu
	idle  time.Time // when users last fell to 0; guarded by listener.mu
}

// fail ends a pending registration with err; listener.mu is held.
func (rg *reg) fail(err error) {
	rg.err = err
	close(rg.ready)
}

// sync takes the advisory locks of the pending registrations and, at most every
// listenIdle/4 (since *swept), drops the registrations unused for listenIdle.
func (ln *listener) sync(ctx context.Context, conn *pgx.Conn, lc *listenConn, swept *time.Time) error {
	ln.mu.Lock()
	pending := lc.pending
	lc.pending = nil
	var drop []int32
	if now := time.Now(); now.Sub(*swept) >= ln.idle/4 {
		*swept = now
		for p, rg := range lc.regs {
			if rg.held && rg.users == 0 && now.Sub(rg.idle) >= ln.idle {
				delete(lc.regs, p) // a new Wait of the key registers anew
				drop = append(drop, rg.key)
			}
		}
	}
	ln.mu.Unlock()
	if len(drop) > 0 {
		if _, err := conn.Exec(ctx, unregisterSQL, ln.table, drop); err != nil {
			ln.failPending(pending, err)
			return err
		}
	}
	if len(pending) == 0 {
		return nil
	}
	if ln.testRegister != nil {
		ln.testRegister()
	}
	keys := make([]int32, len(pending))
	for i, rg := range pending {
		keys[i] = rg.key
	}
	if _, err := conn.Exec(ctx, registerSQL, ln.table, keys); err != nil {
		ln.failPending(pending, err)
		return err
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for _, rg := range pending {
		rg.held = true
		close(rg.ready)
	}
	return nil
}

// failPending fails registrations taken from lc.pending.
func (ln *listener) failPending(pending []*reg, err error) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for _, rg := range pending {
		rg.fail(err)
	}
}
