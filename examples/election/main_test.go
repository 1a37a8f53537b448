package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTermsIncrease: every term is led by one candidate at a time (the program's
// goroutines print in order of their terms) and terms increase.
func TestTermsIncrease(t *testing.T) {
	var out strings.Builder
	if err := run(t.Context(), memlockLockers(), 3, 5, 50*time.Millisecond, &out); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^candidate-\d: I lead in term (\d+)$`)
	var last uint64
	matches := re.FindAllStringSubmatch(out.String(), -1)
	if len(matches) < 5 {
		t.Fatalf("%d terms led, want at least 5:\n%s", len(matches), out.String())
	}
	for _, m := range matches {
		term, _ := strconv.ParseUint(m[1], 10, 64)
		if term <= last {
			t.Fatalf("term %d after term %d:\n%s", term, last, out.String())
		}
		last = term
	}
}
