package faultproxy_test

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
)

// TestCutWhere: a CutWhere resets the open connections it matches and refuses the
// new ones it matches, leaves the others alone, and ends with its heal.
func TestCutWhere(t *testing.T) {
	echo := startEcho(t)
	p := newProxy(t, echo.addr())
	a := dial(t, p.Addr())
	b := dial(t, p.Addr())
	roundTrip(t, a, "a")
	roundTrip(t, b, "b")

	var mu sync.Mutex
	cut := map[string]bool{a.LocalAddr().String(): true}
	match := func(client net.Addr) bool {
		mu.Lock()
		defer mu.Unlock()
		return cut[client.String()]
	}
	heal := p.CutWhere(match)
	expectClosed(t, a)
	roundTrip(t, b, "b still forwards")

	// A new connection that matches is reset at once; one that does not forwards.
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	mu.Lock()
	cut[c.LocalAddr().String()] = true // before the proxy's run checks it, or after: both cut it
	mu.Unlock()
	other := p.CutWhere(match) // an open connection that matches only now is cut by a new CutWhere
	expectClosed(t, c)
	other()
	d := dial(t, p.Addr())
	roundTrip(t, d, "d forwards")

	// After heal, nothing is cut: a new connection of a matching address forwards.
	heal()
	heal() // a second call does nothing
	mu.Lock()
	cut = map[string]bool{}
	mu.Unlock()
	all := p.CutWhere(func(net.Addr) bool { return true })
	e, err := net.Dial("tcp", p.Addr())
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		// The proxy's reset came before the dial saw its connection made: cut too.
	case err != nil:
		t.Fatal(err)
	default:
		t.Cleanup(func() { e.Close() })
		expectClosed(t, e)
	}
	expectClosed(t, b)
	expectClosed(t, d)
	all()
	f := dial(t, p.Addr())
	roundTrip(t, f, "after heal")
}
