package conformance_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
)

// TestExploreReference: memlock behind simnet, with every fault, passes Explore.
func TestExploreReference(t *testing.T) {
	conformance.Explore(t, simHarness(newMemlock, clientBugs{}, serverBugs{}), &conformance.ExploreOptions{Duration: 3 * time.Second})
}

// seedDuration is how long each seed of a mutant's exploration runs.
const seedDuration = 3 * time.Second

// exploreMutant runs Explore on h with up to n seeds (DISTLOCK_EXPLORE=n), one
// subtest each; with -test.failfast it stops at the first seed that finds the bug.
func exploreMutant(t *testing.T, h conformance.Harness, n string) {
	seeds, err := strconv.Atoi(n)
	if err != nil || seeds < 1 {
		t.Fatalf("DISTLOCK_EXPLORE=%q: want a number of seeds", n)
	}
	for i := range seeds {
		t.Run(fmt.Sprint("seed", i+1), func(t *testing.T) {
			conformance.Explore(t, h, &conformance.ExploreOptions{Seed: uint64(i + 1), Duration: seedDuration, HistoryDir: t.TempDir()})
		})
	}
}

// exploreSeeds is how many seeds TestMutantsExplore gives each mutant.
const exploreSeeds = 3

// TestMutantsExplore runs every mutant through Explore alone (not Run's targeted
// subtests), each in a child process, up to exploreSeeds seeds, and reports which
// it catches, by which rule, and after how many seeds. It fails when Explore
// catches fewer than minExploreCaught of them.
func TestMutantsExplore(t *testing.T) {
	if os.Getenv("DISTLOCK_MUTANT") != "" {
		t.Skip("inside a mutant child")
	}
	var mu sync.Mutex
	caught, seedsUsed := 0, 0
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	t.Run("mutants", func(t *testing.T) {
		for _, m := range mutants {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				seed, rule := exploreChild(t, m.name)
				mu.Lock()
				defer mu.Unlock()
				if seed == 0 {
					t.Logf("NOT CAUGHT in %d seeds of %v", exploreSeeds, seedDuration)
					return
				}
				caught++
				seedsUsed += seed
				t.Logf("caught in seed %d: %s", seed, rule)
			})
		}
	})
	total := len(mutants)
	t.Logf("Explore caught %d of %d mutants (%.1f seeds of %v on average for those caught)", caught, total, float64(seedsUsed)/float64(max(caught, 1)), seedDuration)
	if caught < minExploreCaught {
		t.Fatalf("Explore caught %d of %d mutants, want at least %d", caught, total, minExploreCaught)
	}
}

// minExploreCaught is how many mutants Explore must catch.
const minExploreCaught = 18

// exploreChild explores mutant name in a child process and returns the first seed
// that caught it (0 for none) and the first violation's line.
func exploreChild(t *testing.T, name string) (seed int, rule string) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMutantTarget$", "-test.failfast", "-test.v")
	cmd.Env = append(os.Environ(), "DISTLOCK_MUTANT="+name, fmt.Sprintf("DISTLOCK_EXPLORE=%d", exploreSeeds))
	out, err := cmd.CombinedOutput()
	if err == nil {
		return 0, ""
	}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "--- FAIL: TestMutantTarget/seed") {
			fmt.Sscanf(strings.TrimPrefix(line, "--- FAIL: TestMutantTarget/seed"), "%d", &seed)
		}
		if rule == "" && (strings.Contains(line, "explore_report.go:") || strings.Contains(line, "explore_ops.go:")) && !strings.Contains(line, "explore: seed") {
			rule = line
		}
	}
	if seed == 0 {
		t.Fatalf("the child failed outside Explore's seeds: %v\n%s", err, tail(out))
	}
	if len(rule) > 300 {
		rule = rule[:300]
	}
	return seed, rule
}

// TestExploreSessionModel: simSession without its bugs passes Explore, so that
// Explore's catches of the session mutants are the bugs, not the model.
func TestExploreSessionModel(t *testing.T) {
	conformance.Explore(t, simHarness(newMemlock, clientBugs{session: 1}, serverBugs{}), &conformance.ExploreOptions{Duration: 3 * time.Second})
}
