package conformance

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testLossWatcher: when the client implements distlock.LossWatcher, AfterLost runs
// its function once the lease is unlocked and not before, not at all once stopped,
// and at once for a lease that is not held.
func (s *suite) testLossWatcher(t *testing.T) {
	a := s.client(t)
	w, ok := a.Locker.(distlock.LossWatcher)
	if !ok {
		t.Log("backend is no LossWatcher: Hold waits on Lost's channel")
		return
	}
	key := s.key(t)
	la := s.lock(t, a, key, s.long, rWatch)
	ran, stopped := make(chan struct{}), make(chan struct{})
	var runs, strays atomic.Int32
	stop := w.AfterLost(la, func() {
		if runs.Add(1) == 1 {
			close(ran)
		}
	})
	stop2 := w.AfterLost(la, func() {
		strays.Add(1)
		close(stopped)
	})
	// A round trip to the backend gives a function started by mistake time to run.
	if _, err := a.Locker.Renew(s.opCtx(t), la, s.long); err != nil {
		t.Fatalf("%s: Renew of a held lease: %v", rWatch, err)
	}
	if runs.Load() != 0 || strays.Load() != 0 {
		t.Fatalf("%s: AfterLost ran its function while the lease is held", rWatch)
	}
	if !stop2() {
		t.Fatalf("%s: stop before the loss reports that the function was already run", rWatch)
	}
	s.unlock(t, a, la, rWatch)
	waitRun(t, ran, s.op, "after Unlock")
	if stop() {
		t.Fatalf("%s: stop after the function ran reports that it kept it from running", rWatch)
	}
	// Another AfterLost, on the lease that is not held now, runs at once.
	late := make(chan struct{})
	w.AfterLost(la, func() { close(late) })
	waitRun(t, late, s.op, "for a lease that is not held")
	if n := runs.Load(); n != 1 {
		t.Fatalf("%s: AfterLost ran its function %d times", rWatch, n)
	}
	select {
	case <-stopped:
		t.Fatalf("%s: AfterLost ran a function whose stop returned true", rWatch)
	default:
	}
}

// waitRun fails t unless ran closes within d.
func waitRun(t *testing.T, ran <-chan struct{}, d time.Duration, when string) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ran:
	case <-timer.C:
		t.Fatalf("%s: AfterLost did not run its function within %v %s", rWatch, d, when)
	}
}
