package conformance_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// sessionTTL is how long a simSession's lock lives in the table: as long as its
// session, which outlives every test.
const sessionTTL = time.Hour

// A simSession models a session backend's client (zklock): its locks live on the
// server as long as its session, and a reaper of its own deletes each lock at its
// lease's Expires, retrying through outages until the lock is gone. Close must
// leave the reapers running until then; with givesUp, Close stops them, as a
// Close that gives up its clean-up after a fixed time would while the servers
// cannot be reached. Crash ends the session: the server drops its locks.
type simSession struct {
	*simClient
	givesUp bool

	mu     sync.Mutex
	closed bool
	locks  map[string]*simSessionLock // by token
	wg     sync.WaitGroup
}

type simSessionLock struct {
	lease   distlock.Lease // as the table has it
	expires time.Time      // the latest Expires the client returned
	timer   *time.Timer
	gone    bool
}

func newSimSession(c *simClient, givesUp bool) *simSession {
	return &simSession{simClient: c, givesUp: givesUp, locks: map[string]*simSessionLock{}}
}

func (s *simSession) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if err := distlock.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, simErr("TryLock", key, err)
	}
	start := time.Now()
	tl, err := s.simClient.tryLock(ctx, key, sessionTTL)
	if err != nil {
		return distlock.Lease{}, simErr("TryLock", key, err)
	}
	lease := tl
	lease.Expires = start.Add(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := &simSessionLock{lease: tl, expires: lease.Expires}
	s.locks[tl.Token] = sl
	s.wg.Add(1)
	sl.timer = time.AfterFunc(time.Until(sl.expires), func() { s.reap(sl) })
	return lease, nil
}

func (s *simSession) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	if err := distlock.ValidateLease(l); err != nil {
		return l, simErr("Renew", l.Key, err)
	}
	if err := distlock.ValidateTTL(ttl); err != nil {
		return l, simErr("Renew", l.Key, err)
	}
	start := time.Now()
	s.mu.Lock()
	sl := s.locks[l.Token]
	if sl == nil || sl.lease.Key != l.Key || sl.gone || !time.Now().Before(sl.expires) {
		s.mu.Unlock()
		return l, simErr("Renew", l.Key, distlock.ErrNotHeld)
	}
	tl := sl.lease
	s.mu.Unlock()
	if _, err := s.simClient.renew(ctx, tl, sessionTTL); err != nil {
		return l, simErr("Renew", l.Key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl.gone || !time.Now().Before(sl.expires) {
		return l, simErr("Renew", l.Key, distlock.ErrNotHeld)
	}
	next := l
	next.Expires = start.Add(ttl)
	if next.Expires.After(sl.expires) {
		sl.expires = next.Expires
		sl.timer.Reset(time.Until(sl.expires))
	}
	return next, nil
}

func (s *simSession) Unlock(ctx context.Context, l distlock.Lease) error {
	if err := distlock.ValidateLease(l); err != nil {
		return simErr("Unlock", l.Key, err)
	}
	s.mu.Lock()
	sl := s.locks[l.Token]
	if sl == nil || sl.lease.Key != l.Key || sl.gone {
		s.mu.Unlock()
		return simErr("Unlock", l.Key, distlock.ErrNotHeld)
	}
	tl := sl.lease
	s.mu.Unlock()
	return simErr("Unlock", l.Key, s.simClient.unlock(ctx, tl))
}

// reap deletes sl's lock from the table at its Expires, retrying until it is gone.
func (s *simSession) reap(sl *simSessionLock) {
	for {
		s.mu.Lock()
		if until := time.Until(sl.expires); until > 0 { // renewed meanwhile
			sl.timer.Reset(until)
			s.mu.Unlock()
			return
		}
		sl.gone = true
		stop := s.givesUp && s.closed
		s.mu.Unlock()
		if stop {
			s.wg.Done()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := s.simClient.unlock(ctx, sl.lease)
		cancel()
		if err == nil || errors.Is(err, distlock.ErrNotHeld) || s.crashed() {
			s.wg.Done()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *simSession) crashed() bool {
	s.simClient.mu.Lock()
	defer s.simClient.mu.Unlock()
	return s.simClient.closed
}

// crash ends the session: the server drops its locks.
func (s *simSession) crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.locks {
		_ = s.srv.table().Unlock(context.Background(), sl.lease)
	}
}

// Close stops nothing but, with givesUp, the reapers of locks not yet deleted.
func (s *simSession) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// wait waits for the reapers of the locks that expired, and stops the others.
func (s *simSession) wait() {
	s.mu.Lock()
	for _, sl := range s.locks {
		if !sl.gone && sl.timer.Stop() {
			sl.gone = true
			s.wg.Done()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}
