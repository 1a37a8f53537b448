package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/distlock/distlock/memlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPausedHoldersLateWriteIsRejected(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), memlock.New(), &out); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{
		`A acquired "report.csv" with fence 1`,
		`B acquired "report.csv" with fence 2`,
		"A's late write was rejected: write \"A's stale draft\" with fence 1: stale fencing token (fence 2 has written)",
		`the store holds "B's report"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestStore(t *testing.T) {
	s := NewStore()
	steps := []struct {
		value string
		fence uint64
		stale bool
	}{
		{"v1", 1, false},
		{"v1 again", 1, false}, // the same holder writes again
		{"v3", 3, false},
		{"late", 2, true},
		{"v4", 4, false},
		{"very late", 1, true},
	}
	for _, st := range steps {
		err := s.Write("k", st.value, st.fence)
		if got := errors.Is(err, ErrStaleFence); got != st.stale {
			t.Fatalf("Write(%q, fence %d) = %v; stale = %v, want %v", st.value, st.fence, err, got, st.stale)
		}
	}
	if got := s.Read("k"); got != "v4" {
		t.Fatalf("Read = %q, want v4", got)
	}
	if err := s.Write("other", "x", 1); err != nil {
		t.Fatalf("fences are per key: %v", err)
	}
}
