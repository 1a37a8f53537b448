package conformance_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
)

// TestExploreReference: memlock behind simnet, with every fault, passes Explore.
func TestExploreReference(t *testing.T) {
	conformance.Explore(t, simHarness(newMemlock, clientBugs{}, serverBugs{}), &conformance.ExploreOptions{Duration: 3 * time.Second})
}
