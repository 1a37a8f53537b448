//go:build !matrix

package benchmarks

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSmoke runs every workload tiny against memlock, so that CI compiles and runs
// the harness in seconds, without servers.
func TestSmoke(t *testing.T) {
	cfg := SmokeConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := MemlockSubjects(cfg)[0]
	for _, g := range cfg.W1Goroutines {
		r := RunW1Rounds(ctx, []Subject{s}, cfg, g, func(int) string { return "smoke/w1/" })[0]
		if !r.OK() || r.N != cfg.W1Ops || r.Rate <= 0 || r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("W1 with %d goroutines: %+v", g, r)
		}
	}
	r := RunW2(ctx, s, cfg, "smoke/w2")
	if !r.OK() || r.N == 0 || r.Gaps == 0 || r.Violations != 0 || r.P50 < 0 {
		t.Errorf("W2: %+v", r)
	}
	r = RunW3(ctx, s, cfg, "smoke/w3/")
	if !r.OK() || r.N != cfg.W3Trials {
		t.Errorf("W3: %+v", r)
	}
	// The key was abandoned, not released: the waiter must have waited for the ttl
	// (memlock frees it at the holder's Expires, taken before the kill).
	if r.Max > 10*cfg.TTL {
		t.Errorf("W3 failover %v, far over the ttl %v", r.Max, cfg.TTL)
	}
	t.Logf("W3: %+v", r)
}
