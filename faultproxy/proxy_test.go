package faultproxy_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/faultproxy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Generous bounds: the machine's two cores are shared.
const (
	opTimeout = 10 * time.Second       // any single step that should succeed
	promptly  = 5 * time.Second        // a step that should fail fast (well under opTimeout)
	silence   = 300 * time.Millisecond // how long we listen for bytes that must not come
)

// echoServer is a plain loopback echo server that counts the bytes it received.
type echoServer struct {
	ln       net.Listener
	received atomic.Int64
	ended    atomic.Int64 // connections whose handler has returned
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	stopOnce sync.Once
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, conns: make(map[net.Conn]struct{})}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Go(func() {
				defer s.ended.Add(1)
				defer c.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					s.received.Add(int64(n))
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(s.stop)
	return s
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

// stop closes the listener and every connection and waits for the handlers.
func (s *echoServer) stop() {
	s.stopOnce.Do(func() {
		s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

func newProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target, nil)
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

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, opTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// listen returns a loopback listener whose accepted connections the test drives itself.
func listen(t *testing.T) *net.TCPListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.TCPListener)
}

func accept(t *testing.T, ln *net.TCPListener) net.Conn {
	t.Helper()
	if err := ln.SetDeadline(time.Now().Add(opTimeout)); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pair connects a client through p to ln and returns both ends.
func pair(t *testing.T, p *faultproxy.Proxy, ln *net.TCPListener) (client, server net.Conn) {
	t.Helper()
	client = dial(t, p.Addr())
	server = accept(t, ln)
	return client, server
}

func send(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if err := c.SetWriteDeadline(time.Now().Add(opTimeout)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

// expect reads exactly len(want) bytes and compares them.
func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(opTimeout)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %q: got %q, %v", want, got, err)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	send(t, c, msg)
	expect(t, c, msg)
}

// expectSilent asserts that nothing arrives on c for d: the read must end by c's own
// deadline.
func expectSilent(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during blackhole = %q, %v; want nothing until the deadline", buf[:n], err)
	}
}

// expectClosed asserts that reading c fails (EOF or reset), promptly and not by
// timing out.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(promptly)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := io.Copy(io.Discard, c) // returns nil on EOF
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after %v (read %d bytes)", time.Since(start), n)
	}
	t.Logf("connection ended after %v: err=%v", time.Since(start), err)
}

// waitFor polls cond every few ms until it holds or timeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestForward(t *testing.T) {
	echo := startEcho(t)
	p := newProxy(t, echo.addr())
	if p.Target() != echo.addr() {
		t.Errorf("Target() = %q, want %q", p.Target(), echo.addr())
	}

	c := dial(t, p.Addr())
	roundTrip(t, c, "hello")
	roundTrip(t, c, "world")

	// Several connections at once, each with a payload far larger than one chunk,
	// written and read concurrently: bytes must arrive intact and in order.
	const conns, size = 4, 1 << 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*conns)
	for range conns {
		c := dial(t, p.Addr())
		payload := make([]byte, size)
		rand.Read(payload)
		deadline := time.Now().Add(opTimeout)
		c.SetDeadline(deadline)
		wg.Go(func() {
			if _, err := c.Write(payload); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			got := make([]byte, size)
			if _, err := io.ReadFull(c, got); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, payload) {
				errs <- errors.New("payload corrupted or reordered")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	want := int64(len("hello") + len("world") + conns*size)
	// A write is counted after it returns, which can be after the peer read it.
	waitFor(t, "the byte counters to count what was delivered", func() bool {
		st := p.Stats()
		return st.BytesToServer >= want && st.BytesToClient >= want
	})
	st := p.Stats()
	if st.Accepted != 1+conns || st.Refused != 0 || st.BytesToServer != want || st.BytesToClient != want || st.BytesDropped != 0 {
		t.Errorf("Stats = %+v, want Accepted=%d, BytesToServer=BytesToClient=%d", st, 1+conns, want)
	}
	if got := echo.received.Load(); got != want {
		t.Errorf("echo server received %d bytes, want %d", got, want)
	}
}

func TestHalfClose(t *testing.T) {
	ln := listen(t)
	p := newProxy(t, ln.Addr().String())
	c, s := pair(t, p, ln)

	send(t, c, "request")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(opTimeout))
	got, err := io.ReadAll(s) // ends at the client's FIN
	if err != nil || string(got) != "request" {
		t.Fatalf("server read %q, %v; want \"request\" then EOF", got, err)
	}
	send(t, s, "reply")
	s.Close()
	c.SetReadDeadline(time.Now().Add(opTimeout))
	got, err = io.ReadAll(c)
	if err != nil || string(got) != "reply" {
		t.Fatalf("client read %q, %v; want \"reply\" then EOF", got, err)
	}
	waitFor(t, "the connection to be torn down", func() bool { return p.Stats().Active == 0 })
}

func TestCutAndHeal(t *testing.T) {
	echo := startEcho(t)
	p := newProxy(t, echo.addr())

	c1 := dial(t, p.Addr())
	roundTrip(t, c1, "before")

	// A reader blocked in Read must be woken by Cut.
	c1.SetReadDeadline(time.Now().Add(promptly))
	readErr := make(chan error, 1)
	go func() {
		_, err := c1.Read(make([]byte, 1))
		readErr <- err
	}()
	p.Cut()
	start := time.Now()
	err := <-readErr
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blocked read after Cut returned %v after %v; want a prompt EOF or reset", err, time.Since(start))
	}
	t.Logf("blocked read ended %v after Cut: %v", time.Since(start), err)
	// The server's side was closed too.
	waitFor(t, "the echo server to see its connection closed", func() bool { return echo.ended.Load() == 1 })

	// New connections are refused (accepted and reset at once) while cut.
	for range 3 {
		c, err := net.DialTimeout("tcp", p.Addr(), opTimeout)
		if err != nil {
			continue // refused at connect: also fine
		}
		expectClosed(t, c)
		c.Close()
	}
	if st := p.Stats(); st.Refused < 1 {
		t.Errorf("Stats = %+v, want Refused >= 1", st)
	}
	if got := echo.received.Load(); got != int64(len("before")) {
		t.Errorf("echo server received %d bytes while cut, want only the %d before", got, len("before"))
	}

	p.Heal()
	c2 := dial(t, p.Addr())
	roundTrip(t, c2, "after heal")
	waitFor(t, "cut connections to be torn down", func() bool { return p.Stats().Active == 1 })
}

func TestBlackholeEcho(t *testing.T) {
	echo := startEcho(t)
	p := newProxy(t, echo.addr())

	c1 := dial(t, p.Addr())
	roundTrip(t, c1, "a")
	base := echo.received.Load()

	p.Blackhole()
	send(t, c1, "lost")
	expectSilent(t, c1, silence) // the client times out with its own deadline
	waitFor(t, "the proxy to drop the bytes", func() bool { return p.Stats().BytesDropped == int64(len("lost")) })
	if got := echo.received.Load(); got != base {
		t.Fatalf("echo server received %d bytes during the blackhole", got-base)
	}

	// New connections are accepted but carry nothing either.
	c2 := dial(t, p.Addr())
	send(t, c2, "void")
	expectSilent(t, c2, silence)
	waitFor(t, "the proxy to drop the bytes", func() bool { return p.Stats().BytesDropped == int64(len("lostvoid")) })
	if got := echo.received.Load(); got != base {
		t.Fatalf("echo server received %d bytes during the blackhole", got-base)
	}

	p.Heal()
	// Dropped bytes stay lost; new traffic flows on new and old connections.
	c3 := dial(t, p.Addr())
	roundTrip(t, c3, "new")
	roundTrip(t, c1, "old")
	roundTrip(t, c2, "old too")
}

func TestBlackholeBothDirections(t *testing.T) {
	ln := listen(t)
	p := newProxy(t, ln.Addr().String())
	c, s := pair(t, p, ln)
	send(t, c, "ping")
	expect(t, s, "ping")
	send(t, s, "pong")
	expect(t, c, "pong")

	p.Blackhole()
	send(t, c, "to server")
	waitFor(t, "client bytes to be dropped", func() bool { return p.Stats().BytesDropped == 9 })
	expectSilent(t, s, silence)
	send(t, s, "to client")
	waitFor(t, "server bytes to be dropped", func() bool { return p.Stats().BytesDropped == 18 })
	expectSilent(t, c, silence)

	// A close by the client is held back during the blackhole, like any other packet.
	c2, s2 := pair(t, p, ln)
	c2.Close()
	expectSilent(t, s2, silence)

	p.Heal()
	send(t, c, "x")
	expect(t, s, "x") // only what was sent after Heal
	send(t, s, "y")
	expect(t, c, "y")
	expectClosed(t, s2) // the held-back close arrives after Heal
}

func TestBlackholeDropsQueuedBytes(t *testing.T) {
	ln := listen(t)
	p := newProxy(t, ln.Addr().String())
	c, s := pair(t, p, ln)

	p.Delay(time.Hour) // anything the proxy reads now waits in its queue
	send(t, c, "queued")
	p.Blackhole() // drops it whether it was queued already or not
	waitFor(t, "queued bytes to be dropped", func() bool { return p.Stats().BytesDropped == 6 })
	p.Heal() // also removes the delay
	send(t, c, "fresh")
	expect(t, s, "fresh")
}

func TestDelay(t *testing.T) {
	echo := startEcho(t)
	p := newProxy(t, echo.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "warm up")

	const d = 100 * time.Millisecond
	p.Delay(d)
	for i := range 3 {
		start := time.Now()
		roundTrip(t, c, "delayed")
		// The request and the reply each cross the proxy once.
		if rtt := time.Since(start); rtt < 2*d {
			t.Errorf("round trip %d took %v with Delay(%v), want >= %v", i, rtt, d, 2*d)
		} else {
			t.Logf("round trip %d: %v with Delay(%v)", i, rtt, d)
		}
	}

	// New connections are delayed too.
	c2 := dial(t, p.Addr())
	start := time.Now()
	roundTrip(t, c2, "new conn")
	if rtt := time.Since(start); rtt < 2*d {
		t.Errorf("round trip on a new connection took %v, want >= %v", rtt, 2*d)
	}

	p.Delay(0)
	roundTrip(t, c, "undelayed")
}

func TestDelayChangeAppliesToWaitingChunks(t *testing.T) {
	echo := startEcho(t)
	p := newProxy(t, echo.addr())
	c := dial(t, p.Addr())

	// With an hour of delay nothing would come back before expect's deadline unless
	// Delay(0) releases chunks that are already waiting.
	p.Delay(time.Hour)
	send(t, c, "1")
	p.Delay(0)
	send(t, c, "2")
	p.Delay(time.Hour)
	send(t, c, "3")
	p.Heal()
	expect(t, c, "123") // and in order
}

func TestCloseLeavesNothing(t *testing.T) {
	echo := startEcho(t)
	ln := listen(t)
	p, err := faultproxy.New(echo.addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p2, err := faultproxy.New(ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p2.Close() })

	// Connections in every kind of state: idle, with bytes waiting on a delay, with a
	// close held back by a blackhole, and one accepted but never served.
	idle := dial(t, p.Addr())
	roundTrip(t, idle, "idle")
	p.Delay(time.Hour)
	waiting := dial(t, p.Addr())
	send(t, waiting, "waiting")
	waitFor(t, "both connections", func() bool { return p.Stats().Active == 2 })

	held, srv := pair(t, p2, ln)
	send(t, held, "ping")
	expect(t, srv, "ping")
	p2.Blackhole()
	held.Close()
	pending := dial(t, p2.Addr())
	waitFor(t, "the second connection", func() bool { return p2.Stats().Active == 2 })

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	expectClosed(t, idle)
	expectClosed(t, waiting)
	expectClosed(t, srv)
	expectClosed(t, pending)
	if err := p.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	// Nothing listens any more.
	if c, err := net.DialTimeout("tcp", p.Addr(), opTimeout); err == nil {
		expectClosed(t, c)
		c.Close()
	}
	// State changes after Close are harmless.
	p.Cut()
	p.Blackhole()
	p.Delay(time.Second)
	p.Heal()

	echo.stop()
	ln.Close()
	for _, c := range []net.Conn{idle, waiting, held, srv, pending} {
		c.Close()
	}
	goleak.VerifyNone(t)
}

func TestUnreachableTarget(t *testing.T) {
	ln := listen(t)
	target := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := newProxy(t, target)
	// The proxy resets the client when it cannot reach the target; the reset may even
	// beat the client's own connect.
	if c, err := net.DialTimeout("tcp", p.Addr(), opTimeout); err == nil {
		expectClosed(t, c)
		c.Close()
	}
	waitFor(t, "the connection to be accepted", func() bool { return p.Stats().Accepted == 1 })
	waitFor(t, "the connection to be torn down", func() bool { return p.Stats().Active == 0 })
}

func TestLocalhostTarget(t *testing.T) {
	echo := startEcho(t)
	_, port, _ := net.SplitHostPort(echo.addr())
	p := newProxy(t, net.JoinHostPort("localhost", port))
	c := dial(t, p.Addr())
	roundTrip(t, c, "via localhost")
}

func TestRejectsNonLoopback(t *testing.T) {
	for _, target := range []string{
		"10.0.0.1:6379",
		"192.168.1.10:2181",
		"8.8.8.8:53",
		"0.0.0.0:6379",
		"[::]:6379",
		"[2001:db8::1]:80",
		"example.com:80",
		"localhost.example.com:80",
		":6379",
		"127.0.0.1",
		"127.0.0.1:0",
		"127.0.0.1:http",
		"127.0.0.1:70000",
		"",
	} {
		p, err := faultproxy.New(target, nil)
		if err == nil {
			p.Close()
			t.Errorf("New(%q) succeeded, want an error", target)
			continue
		}
		if !errors.Is(err, distlock.ErrInvalid) {
			t.Errorf("New(%q) = %v, want an error wrapping ErrInvalid", target, err)
		}
	}
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0", "10.1.2.3:0", "example.com:0", "127.0.0.1"} {
		p, err := faultproxy.New("127.0.0.1:6379", &faultproxy.Options{ListenAddr: listen})
		if err == nil {
			p.Close()
			t.Errorf("New with ListenAddr %q succeeded, want an error", listen)
			continue
		}
		if !errors.Is(err, distlock.ErrInvalid) {
			t.Errorf("New with ListenAddr %q = %v, want an error wrapping ErrInvalid", listen, err)
		}
	}
	if _, err := faultproxy.New("127.0.0.1:6379", &faultproxy.Options{DialTimeout: -time.Second}); !errors.Is(err, distlock.ErrInvalid) {
		t.Errorf("New with negative DialTimeout = %v, want an error wrapping ErrInvalid", err)
	}
	// Loopback targets and listen addresses are accepted (New does not dial).
	for _, target := range []string{"127.0.0.1:6379", "127.1.2.3:6379", "[::1]:6379", "localhost:6379", "LOCALHOST:1"} {
		p, err := faultproxy.New(target, &faultproxy.Options{ListenAddr: "127.0.0.1:0", DialTimeout: time.Second})
		if err != nil {
			t.Errorf("New(%q) = %v, want success", target, err)
			continue
		}
		p.Close()
	}
}

// TestConcurrentUse changes the state from one goroutine while clients talk through
// the proxy; run with -race. Afterwards the proxy must still work.
func TestConcurrentUse(t *testing.T) {
	echo := startEcho(t)
	p := newProxy(t, echo.addr())

	stop := make(chan struct{})
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			buf := make([]byte, 16)
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", p.Addr(), opTimeout)
				if err != nil {
					continue
				}
				for err == nil {
					c.SetDeadline(time.Now().Add(50 * time.Millisecond))
					if _, err = c.Write([]byte("0123456789abcdef")); err == nil {
						_, err = io.ReadFull(c, buf)
					}
					select {
					case progress <- struct{}{}:
					default:
					}
					select {
					case <-stop:
						err = io.EOF
					default:
					}
				}
				c.Close()
			}
		})
	}
	changes := []func(){
		p.Cut, p.Heal, p.Blackhole, func() { p.Delay(time.Millisecond) },
		p.Heal, func() { p.Delay(10 * time.Millisecond) }, p.Blackhole, p.Heal,
		func() { _ = p.Stats() },
	}
	for i := range 100 {
		changes[i%len(changes)]()
		select { // let some traffic through between changes, but never wait long
		case <-progress:
		case <-time.After(100 * time.Millisecond):
		}
	}
	close(stop)
	wg.Wait()

	p.Heal()
	c := dial(t, p.Addr())
	roundTrip(t, c, "still works")
	t.Logf("stats: %+v", p.Stats())
}

// TestBlackholeInterruptsBlockedWrite blackholes a connection while the proxy is blocked
// writing to a server that does not read. The server must then get a prefix of what the
// client sent, never bytes from after the gap, and the stream must work after Heal.
func TestBlackholeInterruptsBlockedWrite(t *testing.T) {
	ln := listen(t)
	p := newProxy(t, ln.Addr().String())
	c, s := pair(t, p, ln)

	payload := make([]byte, 16<<20) // far more than the socket buffers hold
	rand.Read(payload)
	wrote := make(chan error, 1)
	go func() {
		c.SetWriteDeadline(time.Now().Add(opTimeout))
		_, err := c.Write(payload)
		wrote <- err
	}()
	waitFor(t, "the proxy to start writing", func() bool { return p.Stats().BytesToServer > 0 })
	p.Blackhole()
	// The proxy now reads and drops the rest, so the client's write completes although
	// the server has read nothing.
	if err := <-wrote; err != nil {
		t.Fatalf("client write during blackhole: %v", err)
	}
	waitFor(t, "every byte to be written or dropped", func() bool {
		st := p.Stats()
		return st.BytesToServer+st.BytesDropped == int64(len(payload))
	})
	p.Heal()
	send(t, c, "END")

	s.SetReadDeadline(time.Now().Add(opTimeout))
	var got []byte
	buf := make([]byte, 64<<10)
	for !bytes.HasSuffix(got, []byte("END")) {
		n, err := s.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("server read after %d bytes: %v", len(got), err)
		}
	}
	k := len(got) - len("END")
	if !bytes.Equal(got[:k], payload[:k]) {
		t.Fatalf("server got %d bytes that are not a prefix of the payload", k)
	}
	// A write is counted after it returns, which can be after the server read it.
	waitFor(t, "the byte counter to count what the server received", func() bool {
		return p.Stats().BytesToServer >= int64(len(got))
	})
	if st := p.Stats(); st.BytesToServer != int64(len(got)) {
		t.Errorf("Stats = %+v, but the server received %d bytes", st, len(got))
	}
	t.Logf("delivered %d of %d bytes before the blackhole, dropped %d", k, len(payload), p.Stats().BytesDropped)
}
