package main

import (
	"io"
	"testing"
	"time"

	"github.com/distlock/distlock/memlock"
)

func TestEachTickRunsOnce(t *testing.T) {
	ran, err := run(t.Context(), memlock.New(), 3, 6, 150*time.Millisecond, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for tick, n := range ran {
		if n != 1 {
			t.Errorf("tick %d ran %d times across 3 instances, want 1", tick, n)
		}
	}
}
