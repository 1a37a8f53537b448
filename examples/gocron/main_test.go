package main

import (
	"io"
	"testing"
	"time"
)

func TestEachTickRunsOnce(t *testing.T) {
	ran, err := run(memlockLockers(), []time.Duration{0, 40 * time.Millisecond, 100 * time.Millisecond}, 5, 400*time.Millisecond, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for tick, n := range ran {
		if n != 1 {
			t.Errorf("tick %d ran %d times across 3 schedulers, want 1", tick, n)
		}
	}
}
