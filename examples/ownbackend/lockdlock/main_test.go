package lockdlock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if any goroutine (of the server, the clients, the clean-ups
// or the proxies) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
