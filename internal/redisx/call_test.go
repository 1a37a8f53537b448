package redisx

import (
	"context"
	"testing"
)

// BenchmarkCallCancelable: the cost of Call with a context that can be cancelled
// (a worker runs f): one allocation.
func BenchmarkCallCancelable(b *testing.B) {
	g := NewGroup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := g.Enter(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Call(ctx, g, func() (int, error) { return 1, nil })
	}
	g.Leave()
	g.Close()
	g.Wait()
}
