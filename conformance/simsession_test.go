package conformance_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
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
	racy    bool // Renew does not check again, after the server's answer, that its lock was not reaped meanwhile

	mu     sync.Mutex
	closed bool
	ended  bool                       // crashed: the session is over
	locks  map[string]*simSessionLock // by token
	wg     sync.WaitGroup
}

type simSessionLock struct {
	lease   distlock.Lease // as the table has it
	expires time.Time      // the latest Expires the client returned
	timer   *time.Timer
	gone    bool
	reaped  bool // the reaper is done (a racy Renew may arm the timer again)
}

func newSimSession(c *simClient, givesUp, racy bool) *simSession {
	return &simSession{simClient: c, givesUp: givesUp, racy: racy, locks: map[string]*simSessionLock{}}
}

func (s *simSession) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if err := driver.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, simErr("TryLock", key, err)
	}
	start := time.Now()
	tl, err := s.simClient.tryLock(ctx, key, sessionTTL)
	if err != nil {
		return distlock.Lease{}, simErr("TryLock", key, err)
	}
	lease := tl
	lease.Expires = start.Add(ttl)
	if lease.Remaining() <= 0 { // the reply came after the ttl: give the lock back
		_ = s.simClient.unlock(context.WithoutCancel(ctx), tl)
		return distlock.Lease{}, simErr("TryLock", key, errors.New("simnet: the reply came after the ttl"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		// The session ended while the request was in flight: the server drops
		// the lock with the session.
		_ = s.srv.table().Unlock(context.Background(), tl)
		return distlock.Lease{}, simErr("TryLock", key, errors.New("simnet: the session ended"))
	}
	sl := &simSessionLock{lease: tl, expires: lease.Expires}
	s.locks[tl.Token] = sl
	s.wg.Add(1)
	sl.timer = time.AfterFunc(time.Until(sl.expires), func() { s.reap(sl) })
	return lease, nil
}

func (s *simSession) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	if err := driver.ValidateLease(l); err != nil {
		return l, simErr("Renew", l.Key, err)
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return l, simErr("Renew", l.Key, err)
	}
	start := time.Now()
	s.mu.Lock()
	sl := s.locks[l.Token]
	if sl == nil || sl.lease.Key != l.Key || sl.gone || !start.Before(l.Expires) || !start.Before(sl.expires) {
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
	if !s.racy && (sl.gone || !time.Now().Before(sl.expires)) {
		return l, simErr("Renew", l.Key, distlock.ErrNotHeld)
	}
	next := l
	next.Expires = start.Add(ttl)
	if next.Remaining() <= 0 {
		return l, simErr("Renew", l.Key, errors.New("simnet: the reply came after the ttl"))
	}
	if next.Expires.After(sl.expires) {
		sl.expires = next.Expires
		sl.timer.Reset(time.Until(sl.expires))
	}
	return next, nil
}

func (s *simSession) Unlock(ctx context.Context, l distlock.Lease) error {
	if err := driver.ValidateLease(l); err != nil {
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
		if sl.reaped {
			s.mu.Unlock()
			return
		}
		if until := time.Until(sl.expires); until > 0 { // renewed meanwhile
			sl.timer.Reset(until)
			s.mu.Unlock()
			return
		}
		sl.gone = true
		stop := s.givesUp && s.closed
		s.mu.Unlock()
		if stop {
			s.done(sl)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := s.simClient.unlock(ctx, sl.lease)
		cancel()
		if err == nil || errors.Is(err, distlock.ErrNotHeld) || s.crashed() {
			s.done(sl)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// done ends sl's reaper.
func (s *simSession) done(sl *simSessionLock) {
	s.mu.Lock()
	sl.reaped = true
	s.mu.Unlock()
	s.wg.Done()
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
	s.ended = true
	for _, sl := range s.locks {
		_ = s.srv.table().Unlock(context.Background(), sl.lease)
	}
}

// Close stops nothing but, with givesUp, the reapers of locks not yet deleted;
// the locks go at their Expires.
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
			sl.gone, sl.reaped = true, true
			s.wg.Done()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}
