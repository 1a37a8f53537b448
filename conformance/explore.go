package conformance

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

var (
	seedFlag    = flag.Uint64("conformance.seed", 0, "conformance.Explore: the seed of the schedule (0: a new one, printed)")
	exploreFlag = flag.Duration("conformance.explore", 0, "conformance.Explore: how long each exploration runs (0: ExploreOptions.Duration)")
)

// ExploreOptions tune Explore. A nil *ExploreOptions means the defaults.
type ExploreOptions struct {
	// Seed seeds the schedule: which calls each client makes, with what keys, ttls
	// and deadlines, and which faults come when. Zero means the -conformance.seed
	// flag, or a new seed, which a failure prints. The same seed makes the same
	// choices; how they interleave with the backend's own timing still varies.
	Seed uint64
	// Duration is how long calls and faults run. Default 5s; the
	// -conformance.explore flag overrides it.
	Duration time.Duration
	// Clients is how many clients make calls at once (default 4), each with
	// Workers calls in flight (default 2), on Keys keys (default 3: few, so that
	// they contend; two of them differ only in case).
	Clients, Workers, Keys int
	// HistoryDir is where the history of a failed exploration is written, as JSON
	// lines. Default: the system's temporary directory.
	HistoryDir string
}

func (o *ExploreOptions) withDefaults() ExploreOptions {
	var r ExploreOptions
	if o != nil {
		r = *o
	}
	if r.Seed == 0 {
		r.Seed = *seedFlag
	}
	if r.Seed == 0 {
		r.Seed = rand.Uint64()>>11 + 1
	}
	r.Duration = orDefault(r.Duration, 5*time.Second)
	if *exploreFlag > 0 {
		r.Duration = *exploreFlag
	}
	r.Clients = max(r.Clients, 0)
	if r.Clients == 0 {
		r.Clients = 4
	}
	if r.Workers <= 0 {
		r.Workers = 2
	}
	if r.Keys <= 0 {
		r.Keys = 3
	}
	if r.HistoryDir == "" {
		r.HistoryDir = os.TempDir()
	}
	return r
}

// Explore searches for violations of the contract instead of proving fixed
// scenarios: several clients (each from Harness.NewClient) make concurrent calls
// on a few keys, with random ttls and deadlines — TryLock, Renew to a longer, equal
// and shorter ttl, Unlock, Hold and Release, Lock, and now and then a Close of a
// client's Locker (which a fresh client then replaces) — while faults from the
// harness come and go on a timeline of their own. Every call is recorded, and
// the history is checked with Check; after the faults heal, every key must be
// acquirable again within the backend's bounds. A failure names the rule, shows the
// events that break it, writes the whole history to a file and prints the seed
// that replays the schedule (-conformance.seed). A fault the harness lacks is
// reported as NOT RUN in the log.
func Explore(t *testing.T, h Harness, opts *ExploreOptions) {
	t.Helper()
	s := newSuite(t, h)
	o := opts.withDefaults()
	x := newExplorer(t, s, o)
	t.Logf("explore: seed %d (replay with -conformance.seed=%d), %v, %d clients x %d calls, %d keys; faults: %s; not run: %s",
		o.Seed, o.Seed, o.Duration, o.Clients, o.Workers, o.Keys, strings.Join(x.faults.names(), ", "), strings.Join(x.faults.missing, ", "))
	x.run()
	x.finish()
}

// An explorer runs one exploration.
type explorer struct {
	t      *testing.T
	s      *suite
	o      ExploreOptions
	hist   *history
	keys   []string
	faults *faultPlan

	mu      sync.Mutex
	clients []*xclient
	next    int   // the next client's number
	pending []int // the clients to replace
	broken  []Violation
	noClose bool
}

// sameLocker reports whether a and b are the same Locker.
func sameLocker(a, b distlock.Locker) (same bool) {
	defer func() { _ = recover() }() // an incomparable Locker is not shared
	return a == b
}

// An xclient is one client of an exploration, replaced when it is closed or
// crashed.
type xclient struct {
	c      Client
	rec    recorder
	locker distlock.Locker // rec, with the client's loss signal
	mu     sync.Mutex
	leases []distlock.Lease
	gone   bool // closed or crashed
}

func newExplorer(t *testing.T, s *suite, o ExploreOptions) *explorer {
	x := &explorer{t: t, s: s, o: o, hist: newHistory()}
	base := fmt.Sprintf("explore-%d-", o.Seed%1e6)
	for i := range o.Keys {
		name := string(rune('a' + i/2))
		if i%2 == 1 {
			name = strings.ToUpper(name) // keys are opaque bytes: case matters
		}
		x.keys = append(x.keys, base+name)
	}
	x.clients = make([]*xclient, o.Clients)
	for i := range x.clients {
		x.clients[i] = x.newClient()
	}
	// Clients that share one Locker (an in-process backend's harness) are never
	// closed: a Close would end them all.
	x.noClose = sameLocker(x.clients[0].c.Locker, x.clients[len(x.clients)-1].c.Locker)
	x.faults = newFaultPlan(x)
	return x
}

// newClient makes a client and records its calls under a new number.
func (x *explorer) newClient() *xclient {
	c := x.s.client(x.t)
	x.mu.Lock()
	n := x.next
	x.next++
	x.mu.Unlock()
	rec := recorder{l: c.Locker, client: n, h: x.hist}
	return &xclient{c: c, rec: rec, locker: record(c.Locker, n, x.hist)}
}

// client returns client i as it is now.
func (x *explorer) client(i int) *xclient {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.clients[i]
}

// replace puts a fresh client in place of client i, unless it was replaced already.
// The fresh client is made later, on the test's goroutine (a harness may fail the
// test from NewClient) and while no fault of the servers is in place (a harness
// may need the servers to make a client): until then calls go to the old one and
// fail.
func (x *explorer) replace(i int, old *xclient) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.clients[i] == old && !slices.Contains(x.pending, i) {
		x.pending = append(x.pending, i)
	}
}

// replacePending makes the fresh clients that replace() asked for, while no fault
// of the servers is in place (it holds the fault plan's servers lock for reading).
func (x *explorer) replacePending() {
	x.faults.servers.RLock()
	defer x.faults.servers.RUnlock()
	x.mu.Lock()
	pending := x.pending
	x.pending = nil
	x.mu.Unlock()
	for _, i := range pending {
		fresh := x.newClient()
		x.mu.Lock()
		x.clients[i] = fresh
		x.mu.Unlock()
	}
}

// fail records a violation found outside the history (input, liveness).
func (x *explorer) fail(v Violation) {
	x.mu.Lock()
	x.broken = append(x.broken, v)
	x.mu.Unlock()
}

// run makes the calls and the faults for the exploration's Duration, then heals.
func (x *explorer) run() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range x.o.Clients {
		for w := range x.o.Workers {
			rnd := rand.New(rand.NewPCG(x.o.Seed, uint64(1+i*x.o.Workers+w)))
			wg.Go(func() { x.work(i, rnd, stop) })
		}
	}
	fdone := make(chan struct{})
	go func() {
		defer close(fdone)
		x.faults.run(rand.New(rand.NewPCG(x.o.Seed, 0)), stop)
	}()
	// Even when the test fails on this goroutine (a harness's NewClient), the
	// calls end and the faults heal before the test does.
	var once sync.Once
	end := func() {
		once.Do(func() {
			close(stop)
			wg.Wait()
			<-fdone
		})
	}
	defer end()
	for until := time.Now().Add(x.o.Duration); time.Now().Before(until); {
		sleepCtx(x.t.Context(), 10*time.Millisecond)
		x.replacePending()
	}
	end()
	x.replacePending()
}

// work is one worker of client i: calls chosen by rnd until stop.
func (x *explorer) work(i int, rnd *rand.Rand, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		x.step(i, rnd)
		sleepCtx(x.t.Context(), time.Duration(rnd.Int64N(int64(x.s.ttl/10)+1)))
	}
}
