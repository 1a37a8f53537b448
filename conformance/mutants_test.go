package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/memlock"
)

// A mutant is a deliberately broken locker and the rule the suite must catch it by.
type mutant struct {
	name   string
	catch  string // the rule the suite must name in its first failure
	broken func() distlock.Locker
	bugs   clientBugs // client-side bugs, applied by simnet
	server serverBugs // cluster-side bugs, applied by simnet
	// only, when set, runs just these subtests of the suite (a -test.run pattern
	// under TestMutantTarget): for a mutant of a partial model, such as simSession,
	// which models a session client's clean-up and not the rest of a backend.
	only string
	// noKeyLimit declares no MaxKeyLen in the harness of a broken table: Run then
	// tries keys of 64 KiB, memlock's limit, as for a backend without one.
	noKeyLimit bool
	// exploreOnly marks a mutant that only Explore can catch (a race that no
	// fixed scenario hits but by luck): TestMutants leaves it to TestMutantsExplore.
	exploreOnly bool
}

var mutants = []mutant{
	{name: "unlock-ignores-token", catch: "rule 2 (owner check)", broken: func() distlock.Locker { return &unlockIgnoresToken{memlock.New()} }},
	{name: "renew-revives-expired", catch: "rule 2 (owner check)", broken: func() distlock.Locker { return &renewRevives{memlock.New()} }},
	{name: "fence-repeats", catch: "rule 3 (fencing)", broken: func() distlock.Locker { return &fenceRepeats{memlock.New()} }},
	{name: "never-expires", catch: "rule 4 (expiry)", broken: func() distlock.Locker { return &neverExpires{memlock.New()} }},
	{name: "context-error-as-locked", catch: "rule 5 (errors)", broken: func() distlock.Locker { return &ctxAsLocked{memlock.New()} }},
	{name: "expires-after-reply", catch: "Lease contract", broken: func() distlock.Locker { return &expiresAfterReply{memlock.New()} }},
	{name: "check-then-set", catch: "rule 1 (mutual exclusion)", broken: func() distlock.Locker { return newCheckThenSet() }},
	{name: "keys-case-folded", catch: "rule 7 (input)", broken: func() distlock.Locker { return &caseFolded{memlock.New()} }},
	{name: "no-ttl-validation", catch: "rule 7 (input)", broken: func() distlock.Locker { return &noTTLValidation{memlock.New()} }},
	{name: "wait-sleeps-to-expiry", catch: "Waiter contract", broken: func() distlock.Locker { return &waitSleeps{memlock.New()} }},
	{name: "ignores-cancelled-context", catch: "rule 6 (context)", broken: func() distlock.Locker { return &ignoresContext{memlock.New()} }},
	{name: "after-lost-never-runs", catch: "LossWatcher contract", broken: func() distlock.Locker { return &afterLostNeverRuns{memlock.New()} }},
	{name: "after-lost-runs-while-held", catch: "LossWatcher contract", broken: func() distlock.Locker { return &afterLostEager{memlock.New()} }},
	{name: "lost-never-closes", catch: "LossNotifier contract", broken: func() distlock.Locker { return &lostNeverCloses{memlock.New()} }},
	{name: "abandoned-attempt-kept", catch: "rule 5 (errors)", bugs: clientBugs{keepAbandoned: true}},
	{name: "transport-error-as-locked", catch: "rule 5 (errors)", bugs: clientBugs{errAsLocked: true}},
	{name: "renew-from-local-clock", catch: "rule 2 (owner check)", bugs: clientBugs{localRenew: true}},
	{name: "renew-deaf-while-silent", catch: "rule 6 (context)", bugs: clientBugs{deafRenew: true}},
	{name: "batch-waits-for-latest-deadline", catch: "rule 6 (context)", bugs: clientBugs{batchRenew: true}},
	{name: "close-gives-up-cleanup", catch: "rule 4 (expiry)", bugs: clientBugs{session: 2}, only: "Faults/CloseDuring"},
	{name: "renew-in-server-grace", catch: "rule 2 (owner check)", broken: func() distlock.Locker { return &renewInGrace{memlock.New()} }},
	{name: "renew-races-reaper", catch: "rule 1 (mutual exclusion)", bugs: clientBugs{session: 3}, exploreOnly: true},
	{name: "bare-errors", catch: "rule 5 (errors)", broken: func() distlock.Locker { return &bareErrors{memlock.New()} }},
	{name: "key-in-cause", catch: "rule 5 (errors)", broken: func() distlock.Locker { return &keyInCause{memlock.New()} }, noKeyLimit: true},
	{name: "returns-expired-lease", catch: "Lease contract", bugs: clientBugs{expiredLease: true}},
	{name: "renew-shortens", catch: "rule 1 (mutual exclusion)", server: serverBugs{renewShortens: true}},
	{name: "isolated-member-renews", catch: "rule 1 (mutual exclusion)", bugs: clientBugs{staleRenew: true}},
	{name: "leader-local-table", catch: "rule 1 (mutual exclusion)", server: serverBugs{leaderLocal: true}},
	{name: "minority-holds-writes", catch: "rule 1 (mutual exclusion)", server: serverBugs{unreplicated: true}},
	{name: "restart-forgets-undeclared", catch: "rule 1 (mutual exclusion)", server: serverBugs{restartForgets: true}},
}

// newMemlock is the reference table behind simnet.
func newMemlock() distlock.Locker { return memlock.New() }

// TestMutantTarget runs the suite against the mutant named by DISTLOCK_MUTANT, or
// against plain memlock when it is unset. TestMutants runs it in child processes.
func TestMutantTarget(t *testing.T) {
	name := os.Getenv("DISTLOCK_MUTANT")
	if name == "" {
		// The reference: memlock behind the simulated network and cluster, every fault;
		// and as the session client that close-gives-up-cleanup breaks.
		conformance.Run(t, simHarness(newMemlock, clientBugs{}, serverBugs{}))
		return
	}
	if name == sessionModel { // close-gives-up-cleanup's model, without the bug
		conformance.Run(t, simHarness(newMemlock, clientBugs{session: 1}, serverBugs{}))
		return
	}
	var m mutant
	for _, mm := range mutants {
		if mm.name == name {
			m = mm
		}
	}
	if m.name == "" {
		t.Fatalf("unknown mutant %q", name)
	}
	h := mutantHarness(m)
	if seeds := os.Getenv("DISTLOCK_EXPLORE"); seeds != "" {
		exploreMutant(t, h, seeds)
		return
	}
	conformance.Run(t, h)
}

// mutantHarness is m's harness: memlock behind simnet with m's client- or
// cluster-side bugs, or m's broken table called directly by clients that share it.
func mutantHarness(m mutant) conformance.Harness {
	if m.broken == nil {
		return simHarness(newMemlock, m.bugs, m.server)
	}
	table := m.broken()
	caps := conformance.Capabilities{MaxKeyLen: memlock.MaxKeyLen}
	if m.noKeyLimit {
		caps.MaxKeyLen = 0
	}
	return conformance.Harness{
		NewClient: func(t testing.TB) conformance.Client {
			return conformance.Client{Locker: table, Crash: func() {}}
		},
		Caps: caps,
	}
}

// sessionModel names simSession without its bug, for TestSessionModel.
const sessionModel = "session-model"

// TestSessionModel shows that simSession without its bug passes the tests that
// close-gives-up-cleanup fails, so that they catch the bug and not the model.
func TestSessionModel(t *testing.T) {
	if os.Getenv("DISTLOCK_MUTANT") != "" {
		t.Skip("inside a mutant child")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMutantTarget$/Faults/CloseDuring", "-test.v")
	cmd.Env = append(os.Environ(), "DISTLOCK_MUTANT="+sessionModel)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestMutantTarget/Faults/CloseDuringPartition") {
		t.Fatalf("simSession without its bug fails Close during an outage (err %v):\n%s", err, tail(out))
	}
}

// TestMutants shows that the suite catches every mutant: each runs the suite in a
// child process, which must fail, and its output must name the rule it breaks.
func TestMutants(t *testing.T) {
	if os.Getenv("DISTLOCK_MUTANT") != "" {
		t.Fatal("TestMutants must not run inside a mutant child")
	}
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, m := range mutants {
		if m.exploreOnly {
			continue
		}
		t.Run("mutant_"+m.name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			run := "^TestMutantTarget$"
			if m.only != "" {
				run += "/" + m.only
			}
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.failfast", "-test.v")
			cmd.Env = append(os.Environ(), "DISTLOCK_MUTANT="+m.name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("mutant %s survived the suite (err %v); output:\n%s", m.name, err, tail(out))
			}
			if !strings.Contains(string(out), m.catch) {
				t.Fatalf("mutant %s failed the suite, but not by %q; output:\n%s", m.name, m.catch, tail(out))
			}
			t.Logf("caught: %s", firstFailure(out, m.catch))
		})
	}
}

func tail(out []byte) string {
	lines := strings.Split(string(out), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

func firstFailure(out []byte, catch string) string {
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, catch) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// --- the mutants ---

// unlockIgnoresToken releases whoever holds the key: the blog post's bare DEL.
type unlockIgnoresToken struct{ *memlock.Locker }

func (m *unlockIgnoresToken) Unlock(ctx context.Context, l distlock.Lease) error {
	if err := driver.ValidateLease(l); err != nil {
		return err
	}
	if !m.Revoke(l.Key) {
		return fmt.Errorf("mutant: %w", distlock.ErrNotHeld)
	}
	return nil
}

// renewRevives re-acquires a lapsed lease in Renew when the key happens to be free.
type renewRevives struct{ *memlock.Locker }

func (m *renewRevives) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	next, err := m.Locker.Renew(ctx, l, ttl)
	if errors.Is(err, distlock.ErrNotHeld) {
		return m.TryLock(ctx, l.Key, ttl)
	}
	return next, err
}

// fenceRepeats hands out one fence forever.
type fenceRepeats struct{ *memlock.Locker }

func (m *fenceRepeats) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	l, err := m.Locker.TryLock(ctx, key, ttl)
	l.Fence = min(l.Fence, 1)
	return l, err
}

// neverExpires holds keys for a thousand times their ttl while reporting ttl.
type neverExpires struct{ *memlock.Locker }

func (m *neverExpires) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now()
	l, err := m.Locker.TryLock(ctx, key, 1000*ttl)
	if err == nil {
		l.Expires = start.Add(ttl)
	}
	return l, err
}

// ctxAsLocked reports every failure as contention.
type ctxAsLocked struct{ *memlock.Locker }

func (m *ctxAsLocked) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	l, err := m.Locker.TryLock(ctx, key, ttl)
	if err != nil && !errors.Is(err, distlock.ErrInvalid) {
		err = fmt.Errorf("mutant: %w", distlock.ErrLocked)
	}
	return l, err
}

// expiresAfterReply computes Expires from when the (slow) reply arrived.
type expiresAfterReply struct{ *memlock.Locker }

func (m *expiresAfterReply) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	l, err := m.Locker.TryLock(ctx, key, ttl)
	time.Sleep(100 * time.Millisecond) // the round trip
	if err == nil {
		l.Expires = time.Now().Add(ttl)
	}
	return l, err
}

// caseFolded maps keys to lower case, so "a" and "A" collide.
type caseFolded struct{ *memlock.Locker }

func (m *caseFolded) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	l, err := m.Locker.TryLock(ctx, asciiLower(key), ttl)
	l.Key = key
	return l, err
}

func (m *caseFolded) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	key := l.Key
	l.Key = asciiLower(key)
	next, err := m.Locker.Renew(ctx, l, ttl)
	next.Key = key
	return next, err
}

func (m *caseFolded) Unlock(ctx context.Context, l distlock.Lease) error {
	l.Key = asciiLower(l.Key)
	return m.Locker.Unlock(ctx, l)
}

func (m *caseFolded) Wait(ctx context.Context, key string) error {
	return m.Locker.Wait(ctx, asciiLower(key))
}

func (m *caseFolded) Inspect(ctx context.Context, key string) (distlock.Holder, error) {
	h, err := m.Locker.Inspect(ctx, asciiLower(key))
	h.Key = key
	return h, err
}

// noTTLValidation turns a bad ttl into a default instead of refusing it.
type noTTLValidation struct{ *memlock.Locker }

func (m *noTTLValidation) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if ttl <= 0 {
		ttl = time.Second
	}
	return m.Locker.TryLock(ctx, key, ttl)
}

// waitSleeps polls the holder's expiry instead of being woken by Unlock.
type waitSleeps struct{ *memlock.Locker }

func (m *waitSleeps) Wait(ctx context.Context, key string) error {
	if err := driver.ValidateKey(key, memlock.MaxKeyLen); err != nil {
		return err
	}
	h, err := m.Inspect(ctx, key)
	if errors.Is(err, distlock.ErrNotHeld) {
		return nil
	}
	if err != nil {
		return errors.Join(distlock.ErrLocked, err)
	}
	t := time.NewTimer(time.Until(h.Expires))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Join(distlock.ErrLocked, ctx.Err())
	}
}

// ignoresContext goes ahead with a dead context.
type ignoresContext struct{ *memlock.Locker }

func (m *ignoresContext) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	return m.Locker.TryLock(context.WithoutCancel(ctx), key, ttl)
}

// checkThenSet is a lock table whose TryLock checks and sets in two steps.
type checkThenSet struct {
	mu    sync.Mutex
	keys  map[string]string
	fence map[string]uint64
	exp   map[string]time.Time
}

func newCheckThenSet() *checkThenSet {
	return &checkThenSet{keys: map[string]string{}, fence: map[string]uint64{}, exp: map[string]time.Time{}}
}

func (m *checkThenSet) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if err := driver.ValidateKey(key, memlock.MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, err
	}
	start := time.Now()
	m.mu.Lock()
	free := m.keys[key] == "" || !start.Before(m.exp[key])
	m.mu.Unlock()
	if !free {
		return distlock.Lease{}, distlock.ErrLocked
	}
	time.Sleep(100 * time.Microsecond) // the round trip between GET and SET
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fence[key]++
	tok := driver.NewToken()
	m.keys[key], m.exp[key] = tok, start.Add(ttl)
	return distlock.Lease{Key: key, Token: tok, Fence: m.fence[key], Expires: start.Add(ttl)}, nil
}

func (m *checkThenSet) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	if err := driver.ValidateLease(l); err != nil {
		return l, err
	}
	if err := driver.ValidateTTL(ttl); err != nil {
		return l, err
	}
	start := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys[l.Key] != l.Token || !start.Before(m.exp[l.Key]) {
		return distlock.Lease{}, distlock.ErrNotHeld
	}
	m.exp[l.Key] = start.Add(ttl)
	l.Expires = m.exp[l.Key]
	return l, nil
}

func (m *checkThenSet) Unlock(ctx context.Context, l distlock.Lease) error {
	if err := driver.ValidateLease(l); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys[l.Key] != l.Token || !time.Now().Before(m.exp[l.Key]) {
		return distlock.ErrNotHeld
	}
	m.keys[l.Key] = ""
	return nil
}

// asciiLower folds ASCII letters only, keeping every other byte.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// lostNeverCloses hands out loss channels that nobody ever closes (a watcher leak).
type lostNeverCloses struct{ *memlock.Locker }

func (m *lostNeverCloses) Lost(distlock.Lease) <-chan struct{} { return make(chan struct{}) }

// afterLostNeverRuns accepts AfterLost functions and never runs them.
type afterLostNeverRuns struct{ *memlock.Locker }

func (m *afterLostNeverRuns) AfterLost(distlock.Lease, func()) func() bool {
	return func() bool { return true }
}

// afterLostEager runs AfterLost functions at once, held or not.
type afterLostEager struct{ *memlock.Locker }

func (m *afterLostEager) AfterLost(_ distlock.Lease, f func()) func() bool {
	go f()
	return func() bool { return false }
}

// bareErrors returns the causes without the *distlock.OpError around them.
type bareErrors struct{ *memlock.Locker }

func bare(err error) error {
	var oe *distlock.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

func (m *bareErrors) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	l, err := m.Locker.TryLock(ctx, key, ttl)
	return l, bare(err)
}

// keyInCause quotes the key in full in the causes of its TryLock errors: a message
// that grows with the key. Its harness declares no MaxKeyLen, as a backend that
// takes keys of any length would.
type keyInCause struct{ *memlock.Locker }

func (m *keyInCause) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	l, err := m.Locker.TryLock(ctx, key, ttl)
	var oe *distlock.OpError
	if errors.As(err, &oe) {
		return l, &distlock.OpError{Backend: oe.Backend, Op: oe.Op, Key: oe.Key, Err: fmt.Errorf("%w (key %q)", oe.Err, key)}
	}
	return l, err
}

// renewInGrace keeps each key on the table for 150ms past its lease's Expires (a
// server-side grace, as a drift allowance or a lease revoked on a 500ms tick makes)
// and renews whatever the table still holds, as etcdlock's move path did.
type renewInGrace struct{ *memlock.Locker }

const tableGrace = 150 * time.Millisecond

func (m *renewInGrace) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	if ttl <= 0 {
		return m.Locker.TryLock(ctx, key, ttl) // its ErrInvalid
	}
	start := time.Now()
	l, err := m.Locker.TryLock(ctx, key, ttl+tableGrace)
	if err == nil {
		l.Expires = start.Add(ttl)
	}
	return l, err
}

func (m *renewInGrace) Renew(ctx context.Context, l distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	if ttl <= 0 {
		return m.Locker.Renew(ctx, l, ttl)
	}
	start := time.Now()
	l.Expires = l.Expires.Add(tableGrace) // the table's: renew whatever it still holds
	next, err := m.Locker.Renew(ctx, l, ttl+tableGrace)
	if err == nil {
		next.Expires = start.Add(ttl)
	}
	return next, err
}
