package lockd

import (
	"errors"
	"sync"
	"time"
)

// Errors of the table, sent to clients as the reply words LOCKED, NOTHELD and
// CANCELLED.
var (
	errLocked    = errors.New("LOCKED")
	errNotHeld   = errors.New("NOTHELD")
	errCancelled = errors.New("CANCELLED")
)

// table is the lock table. Every method reads the clock once, under the mutex, so
// that expiry follows the server's monotonic clock and nothing else.
type table struct {
	mu   sync.Mutex
	keys map[string]*entry
	now  func() time.Time // time.Now; tests may replace it
}

// entry is one key's record. It is never deleted, so that its fence never repeats.
type entry struct {
	fence   uint64
	token   string    // the holder's token; "" once released
	expires time.Time // the holder's expiry, on the monotonic clock
	// freed is closed, and replaced, when the holder releases the key (UNLOCK or
	// CANCEL); WAIT selects on it.
	freed chan struct{}
	// cancelled maps the tokens of abandoned LOCKs to the time until which a LOCK
	// with that token is refused.
	cancelled map[string]time.Time
}

func newTable() *table {
	return &table{keys: make(map[string]*entry), now: time.Now}
}

// entry returns key's record (a free one, not stored, when key has none and create
// is false) and drops its stale cancelled tokens. Called with t.mu held.
func (t *table) entry(key string, now time.Time, create bool) *entry {
	e := t.keys[key]
	if e == nil {
		e = &entry{freed: make(chan struct{})}
		if !create {
			return e
		}
		t.keys[key] = e
	}
	for tok, until := range e.cancelled {
		if !now.Before(until) {
			delete(e.cancelled, tok)
		}
	}
	return e
}

func (e *entry) held(now time.Time) bool { return e.token != "" && now.Before(e.expires) }

func (e *entry) release() {
	e.token = ""
	close(e.freed)
	e.freed = make(chan struct{})
}

// lock takes key for ttl and returns its new fence.
func (t *table) lock(key, token string, ttl time.Duration) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.entry(key, now, true)
	if _, ok := e.cancelled[token]; ok {
		return 0, errCancelled
	}
	if e.held(now) {
		return 0, errLocked
	}
	e.fence++
	e.token, e.expires = token, now.Add(ttl)
	return e.fence, nil
}

// renew keeps key held by token until at least now + ttl, never less than before.
func (t *table) renew(key, token string, ttl time.Duration) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.entry(key, now, false)
	if !e.held(now) || e.token != token {
		return errNotHeld
	}
	if exp := now.Add(ttl); exp.After(e.expires) {
		e.expires = exp
	}
	return nil
}

// unlock releases key if token holds it.
func (t *table) unlock(key, token string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.entry(key, now, false)
	if !e.held(now) || e.token != token {
		return errNotHeld
	}
	e.release()
	return nil
}

// cancel undoes a LOCK of key by token whose outcome its client does not know: it
// releases key if token holds it, else it refuses token's LOCK for ttl.
func (t *table) cancel(key, token string, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.entry(key, now, true)
	if e.held(now) && e.token == token {
		e.release()
		return
	}
	if e.cancelled == nil {
		e.cancelled = make(map[string]time.Time)
	}
	e.cancelled[token] = now.Add(ttl)
}

// inspect returns key's fence and remaining time, or errNotHeld when it is free.
func (t *table) inspect(key string) (uint64, time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.entry(key, now, false)
	if !e.held(now) {
		return 0, 0, errNotHeld
	}
	return e.fence, e.expires.Sub(now), nil
}

// watch returns, for a held key, a channel closed when its holder releases it and
// how long until the holder's current expiry; ok is false when key is free.
func (t *table) watch(key string) (freed <-chan struct{}, left time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.entry(key, now, false)
	if !e.held(now) {
		return nil, 0, false
	}
	return e.freed, e.expires.Sub(now), true
}
