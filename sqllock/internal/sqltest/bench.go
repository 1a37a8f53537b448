package sqltest

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
)

// BenchTryLockUnlock measures an uncontended TryLock followed by Unlock of one key.
func BenchTryLockUnlock(b *testing.B, l distlock.Locker) {
	key := Key("bench")
	ctx := b.Context()
	for b.Loop() {
		lease, err := l.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx, lease); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchRoundTrips measures an uncontended TryLock followed by Unlock through p,
// which adds 20ms each way once l is warm: the metric roundtrips/op, ns/op divided
// by 40ms, counts the round trips per TryLock+Unlock (2 when each is one
// statement), whatever the machine's load.
func BenchRoundTrips(b *testing.B, p *faultproxy.Proxy, l distlock.Locker) {
	const oneWay = 20 * time.Millisecond
	key := Key("bench")
	ctx := b.Context()
	warm, err := l.TryLock(ctx, key, 10*time.Second) // connect, prepare
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(ctx, warm); err != nil {
		b.Fatal(err)
	}
	p.Delay(oneWay)
	for b.Loop() {
		lease, err := l.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx, lease); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(2*oneWay), "roundtrips/op")
}
