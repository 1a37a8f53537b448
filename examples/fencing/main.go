// Command fencing shows why a lock is not enough, and how a fencing token fixes it.
//
// Client A takes a lease and then pauses (a GC pause, a swapped-out VM, a slow
// disk) past the lease's Expires. Meanwhile the key lapses, client B takes it and
// writes. Then A wakes up and writes too, still believing it holds the lock. A lease
// cannot stop that late write, but the resource can: every acquisition carries a
// Fence greater than every earlier one's, writers send it along, and the Store below
// rejects a write whose fence is lower than one it has already accepted. A's late
// write carries fence 1 after B's 2: rejected.
//
// It uses memlock, so it runs anywhere; the fence works the same with every backend.
//
//	go run ./examples/fencing
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

func main() {
	if err := run(context.Background(), memlock.New(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fencing:", err)
		os.Exit(1)
	}
}

// ErrStaleFence is the Store's answer to a write from a holder whose lease has been
// superseded.
var ErrStaleFence = errors.New("stale fencing token")

// A Store is the protected resource: a key-value store that fences its writers. It
// remembers, per key, the highest fence that has written it, and rejects a write
// that carries a lower one. A write with the same fence is accepted (one holder
// writes many times). In a real system this check lives in the resource itself —
// a conditional UPDATE ... WHERE fence <= $1, an object store's precondition, a
// service that compares tokens — so that it holds whatever the writers believe.
type Store struct {
	mu     sync.Mutex
	values map[string]string
	fences map[string]uint64
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{values: make(map[string]string), fences: make(map[string]uint64)}
}

// Write sets key to value on behalf of the holder of fence. It returns an error
// wrapping ErrStaleFence, and changes nothing, when a write with a higher fence has
// already been accepted for key.
func (s *Store) Write(key, value string, fence uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seen := s.fences[key]; fence < seen {
		return fmt.Errorf("write %q with fence %d: %w (fence %d has written)", value, fence, ErrStaleFence, seen)
	}
	s.fences[key] = fence
	s.values[key] = value
	return nil
}

// Read returns key's value.
func (s *Store) Read(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[key]
}

// run plays the scenario against l and reports it to out. It returns an error if
// the Store accepted the paused holder's late write.
func run(ctx context.Context, l distlock.Locker, out io.Writer) error {
	const key, ttl = "report.csv", 100 * time.Millisecond
	store := NewStore()

	// A acquires and writes with its fence.
	a, err := l.TryLock(ctx, key, ttl)
	if err != nil {
		return fmt.Errorf("client A: %w", err)
	}
	fmt.Fprintf(out, "A acquired %q with fence %d\n", key, a.Fence)
	if err := store.Write(key, "A's first draft", a.Fence); err != nil {
		return err
	}

	// A pauses and does not renew. (Here it just waits for its lease to run out; a
	// real pause is one that A does not notice.)
	fmt.Fprintln(out, "A pauses past its lease's expiry")
	time.Sleep(time.Until(a.Expires))

	// The key has lapsed: B acquires it and writes.
	// (Lock, not TryLock: a backend's expiry may lag the client's Expires a little.)
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := distlock.Lock(lctx, l, key, ttl, nil)
	if err != nil {
		return fmt.Errorf("client B: %w", err)
	}
	fmt.Fprintf(out, "B acquired %q with fence %d\n", key, b.Fence)
	if err := store.Write(key, "B's report", b.Fence); err != nil {
		return err
	}
	fmt.Fprintln(out, "B wrote with fence", b.Fence)

	// A wakes up and writes, believing it still holds the lock. The Store rejects it.
	err = store.Write(key, "A's stale draft", a.Fence)
	switch {
	case errors.Is(err, ErrStaleFence):
		fmt.Fprintf(out, "A's late write was rejected: %v\n", err)
	case err == nil:
		return fmt.Errorf("the store accepted a write with fence %d after fence %d", a.Fence, b.Fence)
	default:
		return err
	}
	// A's own lease is gone: its Unlock cannot release B's lock.
	if err := l.Unlock(ctx, a); !errors.Is(err, distlock.ErrNotHeld) {
		return fmt.Errorf("client A's Unlock after expiry returned %v, want ErrNotHeld", err)
	}
	if err := l.Unlock(ctx, b); err != nil {
		return fmt.Errorf("client B: %w", err)
	}
	fmt.Fprintf(out, "the store holds %q\n", store.Read(key))
	return nil
}
