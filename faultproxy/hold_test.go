package faultproxy_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
)

// recorder is a loopback echo server that keeps, per connection in accept order,
// the bytes it read and whether it read the end of the stream.
type recorder struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	got   []string
	eof   []bool
	socks []net.Conn
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln}
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			i := len(r.got)
			r.got, r.eof, r.socks = append(r.got, ""), append(r.eof, false), append(r.socks, c)
			r.mu.Unlock()
			r.wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					r.mu.Lock()
					r.got[i] += string(buf[:n])
					r.eof[i] = errors.Is(err, io.EOF)
					r.mu.Unlock()
					if n > 0 {
						_, _ = c.Write(buf[:n]) // the client may be gone
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		r.mu.Lock()
		for _, c := range r.socks {
			_ = c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

// conn returns what connection i sent, and whether its end was read.
func (r *recorder) conn(i int) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.got) {
		return "", false
	}
	return r.got[i], r.eof[i]
}

func newHoldProxy(t *testing.T, target string) *faultproxy.HoldProxy {
	t.Helper()
	p, err := faultproxy.NewHoldProxy(target, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(opTimeout):
		t.Fatalf("%s: not within %v", what, opTimeout)
	}
}

// TestHoldNext: the connection that sends first after HoldNext keeps what its
// client sends, in order, past the client's close, while another connection
// forwards; Release delivers it all, then the close.
func TestHoldNext(t *testing.T) {
	r := startRecorder(t)
	p := newHoldProxy(t, r.ln.Addr().String())
	a := dial(t, p.Addr())
	roundTrip(t, a, "a1") // connection 0 at the server
	b := dial(t, p.Addr())
	roundTrip(t, b, "b1") // connection 1

	h := p.HoldNext()
	if _, err := a.Write([]byte("a2")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, h.Held(), "Held")
	roundTrip(t, b, "b2") // b is not held
	if _, err := a.Write([]byte("a3")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, b, "b3")
	if got, eof := r.conn(0); got != "a1" || eof {
		t.Fatalf("held connection at the server before Release: %q, end read %v; want \"a1\", open", got, eof)
	}
	select {
	case <-h.Done():
		t.Fatal("Done before Release")
	default:
	}

	h.Release()
	waitClosed(t, h.Done(), "Done after Release")
	if got, eof := r.conn(0); got != "a1a2a3" || !eof {
		t.Fatalf("held connection at the server after Done: %q, end read %v; want \"a1a2a3\", end read", got, eof)
	}
	roundTrip(t, b, "b4")
	if got, _ := r.conn(1); got != "b1b2b3b4" {
		t.Fatalf("other connection at the server: %q", got)
	}
}

// TestHoldServerGone: when the server closes the held connection before Release
// (as a killed database session does), Release delivers nothing to it and Done
// still closes.
func TestHoldServerGone(t *testing.T) {
	r := startRecorder(t)
	p := newHoldProxy(t, r.ln.Addr().String())
	a := dial(t, p.Addr())
	roundTrip(t, a, "a1")
	h := p.HoldNext()
	if _, err := a.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, h.Held(), "Held")
	r.mu.Lock()
	_ = r.socks[0].Close() // the server ends the session
	r.mu.Unlock()
	_ = a.Close()
	h.Release()
	waitClosed(t, h.Done(), "Done")
	if got, _ := r.conn(0); got != "a1" {
		t.Fatalf("server read %q after it closed; want \"a1\"", got)
	}
}

// TestHoldClose: Close drops held bytes, ends Done, and leaves no goroutine
// (TestMain checks for leaks).
func TestHoldClose(t *testing.T) {
	r := startRecorder(t)
	p, err := faultproxy.NewHoldProxy(r.ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := dial(t, p.Addr())
	h := p.HoldNext()
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, h.Held(), "Held")
	unpicked := p.HoldNext()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, h.Done(), "Done after Close")
	waitClosed(t, unpicked.Done(), "Done of an unpicked Hold after Close")
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got, _ := r.conn(0); got != "" {
		t.Fatalf("server read %q from a connection held until Close", got)
	}
}

func TestHoldProxyRejectsNonLoopback(t *testing.T) {
	for _, target := range []string{"10.0.0.1:5432", "example.com:80", "127.0.0.1"} {
		if _, err := faultproxy.NewHoldProxy(target, nil); !errors.Is(err, distlock.ErrInvalid) {
			t.Errorf("NewHoldProxy(%q): %v, want ErrInvalid", target, err)
		}
	}
}
