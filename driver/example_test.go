package driver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// store is a Driver over a map: one attempt of each operation, atomic under a
// mutex, with expiry on the process's clock. A real Driver talks to its server and
// obeys ctx; everything else the contract asks, driver.Locker does.
type store struct {
	mu    sync.Mutex
	fence uint64
	held  map[string]entry
}

type entry struct {
	token   string
	expires time.Time
}

func (s *store) Acquire(_ context.Context, key, token string, ttl time.Duration) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.held[key]; ok && time.Now().Before(e.expires) {
		return 0, distlock.ErrLocked
	}
	s.fence++
	s.held[key] = entry{token, time.Now().Add(ttl)}
	return s.fence, nil
}

func (s *store) Renew(_ context.Context, l distlock.Lease, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.held[l.Key]
	if !ok || e.token != l.Token || !time.Now().Before(e.expires) {
		return distlock.ErrNotHeld
	}
	if later := time.Now().Add(ttl); later.After(e.expires) { // never shorten
		s.held[l.Key] = entry{e.token, later}
	}
	return nil
}

func (s *store) Release(_ context.Context, l distlock.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.held[l.Key]; !ok || e.token != l.Token || !time.Now().Before(e.expires) {
		return distlock.ErrNotHeld
	}
	delete(s.held, l.Key)
	return nil
}

// Abandon: a map's Acquire always has a known outcome, so this only releases.
func (s *store) Abandon(ctx context.Context, key, token string, _ time.Duration, _ error) error {
	if err := s.Release(ctx, distlock.Lease{Key: key, Token: token}); !errors.Is(err, distlock.ErrNotHeld) {
		return err
	}
	return nil
}

// A backend is a Driver made a distlock.Locker by NewLocker.
func ExampleNewLocker() {
	l, err := driver.NewLocker(&store{held: map[string]entry{}}, driver.Config{Backend: "maplock", MaxKeyLen: 256})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ctx := context.Background()
	lease, err := l.TryLock(ctx, "report", time.Minute)
	fmt.Println(lease.Fence, err)
	_, err = l.TryLock(ctx, "report", time.Minute)
	fmt.Println(errors.Is(err, distlock.ErrLocked))
	_, err = l.TryLock(ctx, "", time.Minute)
	fmt.Println(err)
	fmt.Println(l.Unlock(ctx, lease))
	// Output:
	// 1 <nil>
	// true
	// maplock: TryLock: distlock: invalid argument: empty key
	// <nil>
}
