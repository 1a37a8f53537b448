package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/distlock/distlock"
)

// Defaults for Options.
const (
	DefaultListenAddr  = "127.0.0.1:0"
	DefaultDialTimeout = 5 * time.Second
)

// Options configure a Proxy. A nil *Options means the defaults.
type Options struct {
	// ListenAddr is the loopback address to listen on. It must be a loopback IP or
	// "localhost" with a numeric port (0 picks a free port). Empty means
	// DefaultListenAddr.
	ListenAddr string
	// DialTimeout bounds connecting to the target for each accepted connection; when
	// it fails, the client's connection is reset. Zero means DefaultDialTimeout; it
	// must not be negative.
	DialTimeout time.Duration
}

// Stats are counters of a Proxy since New.
type Stats struct {
	// Accepted counts client connections accepted, including refused ones.
	Accepted int64
	// Refused counts client connections reset at once because the proxy was cut or
	// closing.
	Refused int64
	// Active is the number of connections not yet torn down.
	Active int
	// BytesToServer and BytesToClient count bytes written to each side.
	BytesToServer int64
	BytesToClient int64
	// BytesDropped counts bytes read from either side and dropped by a blackhole.
	BytesDropped int64
}

type mode int

const (
	modeNormal mode = iota
	modeBlackhole
	modeStall
	modeCut
)

// A Proxy forwards TCP connections from its loopback address to a loopback target and
// injects faults on demand. All its methods are safe for concurrent use.
type Proxy struct {
	target      string
	ln          net.Listener
	dialer      net.Dialer
	dialTimeout time.Duration
	ctx         context.Context // cancelled by Close
	cancel      context.CancelFunc
	wg          sync.WaitGroup // the accept loop and every connection's run

	mu      sync.Mutex
	mode    mode
	delay   time.Duration
	changed chan struct{} // closed (and replaced) on every state change
	conns   map[*conn]struct{}
	closed  bool
	cuts    cutSet // CutWhere's matches (filter.go)

	accepted, refused, toServer, toClient, dropped atomic.Int64
}

// New starts a proxy that listens on a loopback address (opts.ListenAddr, by default a
// free port on 127.0.0.1) and forwards every connection to target, which must be a
// loopback address with a port: 127.0.0.0/8, ::1 or localhost. An address that is not
// loopback, or a bad option, gives an error wrapping distlock.ErrInvalid. The proxy
// starts in normal mode; the caller must Close it.
func New(target string, opts *Options) (*Proxy, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ListenAddr == "" {
		o.ListenAddr = DefaultListenAddr
	}
	if o.DialTimeout < 0 {
		return nil, fmt.Errorf("faultproxy: DialTimeout %v is negative: %w", o.DialTimeout, distlock.ErrInvalid)
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if err := checkAddr("target", target, false); err != nil {
		return nil, err
	}
	if err := checkAddr("ListenAddr", o.ListenAddr, true); err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: loopbackOnly}
	ln, err := lc.Listen(context.Background(), "tcp", o.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen on %s: %w", o.ListenAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target:      target,
		ln:          ln,
		dialer:      net.Dialer{Control: loopbackOnly},
		dialTimeout: o.DialTimeout,
		ctx:         ctx,
		cancel:      cancel,
		changed:     make(chan struct{}),
		conns:       make(map[*conn]struct{}),
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// checkAddr reports whether addr is host:port with a loopback IP or "localhost" and a
// numeric port (0 only when zeroPort).
func checkAddr(what, addr string, zeroPort bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("faultproxy: %s %q is not host:port: %w", what, addr, distlock.ErrInvalid)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (n == 0 && !zeroPort) {
		return fmt.Errorf("faultproxy: %s %q has a bad port %q: %w", what, addr, port, distlock.ErrInvalid)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() {
		return fmt.Errorf("faultproxy: %s %q is not a loopback address (127.0.0.0/8, ::1, localhost): %w",
			what, addr, distlock.ErrInvalid)
	}
	return nil
}

// loopbackOnly is a dialer and listener Control function that refuses any socket
// address that is not loopback, whatever a host name resolved to.
func loopbackOnly(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("faultproxy: refusing non-loopback address %q (%s)", address, network)
	}
	return nil
}

// Addr returns the proxy's listening address (host:port); clients connect to it
// instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut resets every open connection on both sides and makes the proxy reset every new
// connection at once, until Heal (or Blackhole). When Cut returns, every connection
// that was open has been closed.
func (p *Proxy) Cut() {
	conns := p.setMode(modeCut)
	for _, c := range conns {
		c.shutdown(true)
	}
}

// Blackhole keeps connections open and accepts new ones, but drops every byte in both
// directions until Heal (or Cut). Writes in progress are interrupted, so nothing more
// reaches either side once Blackhole returns, apart from bytes already handed to the
// kernel.
func (p *Proxy) Blackhole() {
	conns := p.setMode(modeBlackhole)
	for _, c := range conns {
		c.interruptWrites()
	}
}

// Stall keeps connections open and accepts new ones, but holds every byte in both
// directions until Heal (or Cut), and then delivers them in order, as TCP does across a
// partition: it resends what was not acknowledged until the network heals (or its
// user timeout, which Stall does not model, gives up). A Blackhole loses those bytes
// instead, which no TCP connection does: a protocol that keeps state across the
// messages of a connection (HTTP/2's header compression, gRPC's) may then find that
// connection broken after Heal. Writes in progress are interrupted, so nothing more
// reaches either side once Stall returns, apart from bytes already handed to the
// kernel. What is held per connection and direction is bounded (the proxy stops
// reading beyond it, as a full TCP window does).
func (p *Proxy) Stall() {
	conns := p.setMode(modeStall)
	for _, c := range conns {
		c.interruptWrites()
	}
}

// Heal ends a cut, blackhole or stall and removes any delay: new connections and those still
// open forward normally again. Bytes dropped by a blackhole stay lost; bytes held by a
// stall are delivered.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.delay = 0
	p.mu.Unlock()
	p.setMode(modeNormal)
}

// Delay adds d of latency to every chunk in both directions: a chunk read at time T is
// written at T+d, in order, on new and existing connections, including chunks already
// waiting. d <= 0 removes the delay. Delay does not change the mode.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = max(d, 0)
	p.signalLocked()
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active := len(p.conns)
	p.mu.Unlock()
	return Stats{
		Accepted:      p.accepted.Load(),
		Refused:       p.refused.Load(),
		Active:        active,
		BytesToServer: p.toServer.Load(),
		BytesToClient: p.toClient.Load(),
		BytesDropped:  p.dropped.Load(),
	}
}

// Close stops listening, resets every connection, and returns once every goroutine of
// the proxy has exited. Calling it again does nothing and returns nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.snapshotLocked()
	p.signalLocked()
	p.mu.Unlock()

	err := p.ln.Close()
	p.cancel()
	for _, c := range conns {
		c.shutdown(true)
	}
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("faultproxy: close: %w", err)
	}
	return nil
}

func (p *Proxy) setMode(m mode) []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	p.signalLocked()
	return p.snapshotLocked()
}

// signalLocked wakes every goroutine waiting for a state change. p.mu must be held.
func (p *Proxy) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) snapshotLocked() []*conn {
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	return conns
}

// state returns the current mode and delay, and a channel closed at the next change.
func (p *Proxy) state() (mode, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.changed
}

func (p *Proxy) blackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode == modeBlackhole
}

// stalled reports whether the proxy is stalled, and returns a channel closed at the
// next change.
func (p *Proxy) stalled() (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode == modeStall, p.changed
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		cl, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure such as running out of file descriptors: retry after
			// a short, growing pause rather than spinning.
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		p.accepted.Add(1)

		p.mu.Lock()
		if p.closed || p.mode == modeCut {
			p.mu.Unlock()
			p.refused.Add(1)
			abort(cl)
			continue
		}
		ctx, cancel := context.WithCancel(p.ctx)
		c := &conn{p: p, ctx: ctx, cancel: cancel, client: cl}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

func (p *Proxy) forget(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}
