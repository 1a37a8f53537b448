package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// A HoldProxy forwards TCP connections from a loopback address to a loopback target
// and, on demand, holds back what the client of one connection sends: the bytes stay
// in the proxy, in order, until the test releases them, while every other connection
// forwards normally. It reproduces a request that is held up on its TCP connection
// past the client's deadline and reaches the server after the client gave up, closed
// the connection and went on with other connections. (Proxy.Delay delays every
// connection alike, and drops what is queued once a reply cannot be written to the
// closed client.)
//
// A held connection keeps its server side open after the client closed its side; on
// Release the proxy writes the held bytes, then what the client sent after them, then
// passes the client's close on as a half-close (FIN). Replies from the server are
// forwarded while the client's side is open and discarded after. The methods are
// safe for concurrent use; Close must be called when the test ends.
type HoldProxy struct {
	target      string
	ln          net.Listener
	dialer      net.Dialer
	dialTimeout time.Duration
	ctx         context.Context // cancelled by Close
	cancel      context.CancelFunc
	wg          sync.WaitGroup // the accept loop and every connection's goroutines

	mu     sync.Mutex
	armed  *Hold             // set by HoldNext until a connection picks it
	holds  []*Hold           // every Hold made, for Close
	conns  map[net.Conn]bool // open sockets of both sides, for Close
	closed bool
}

// A Hold is one use of HoldProxy.HoldNext: the connection it picked and the bytes it
// holds.
type Hold struct {
	held     chan struct{} // closed when a connection was picked
	released chan struct{} // closed by Release
	done     chan struct{} // closed when the connection ended, or the proxy closed
	relOnce  sync.Once
	doneOnce sync.Once
}

// Held returns a channel that is closed once a connection has been picked and the
// first bytes its client sent after HoldNext are held in the proxy.
func (h *Hold) Held() <-chan struct{} { return h.held }

// Release lets the held connection forward again: the held bytes are written to the
// server in order, then what the client sent after them, then its close. Calling it
// again does nothing.
func (h *Hold) Release() { h.relOnce.Do(func() { close(h.released) }) }

// Done returns a channel that is closed once the held connection has ended on both
// sides (after Release: the server has read everything that was held, and closed its
// side), or the proxy was closed.
func (h *Hold) Done() <-chan struct{} { return h.done }

func (h *Hold) finish() { h.doneOnce.Do(func() { close(h.done) }) }

// NewHoldProxy starts a HoldProxy that listens on a loopback address
// (opts.ListenAddr, by default a free port on 127.0.0.1) and forwards every
// connection to target, a loopback address with a port. A bad address or option
// gives an error wrapping distlock.ErrInvalid, as New does. The caller must Close
// it.
func NewHoldProxy(target string, opts *Options) (*HoldProxy, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ListenAddr == "" {
		o.ListenAddr = DefaultListenAddr
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
	if o.DialTimeout < 0 {
		return nil, fmt.Errorf("faultproxy: DialTimeout %v is negative: %w", o.DialTimeout, distlock.ErrInvalid)
	}
	lc := net.ListenConfig{Control: loopbackOnly}
	ln, err := lc.Listen(context.Background(), "tcp", o.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen on %s: %w", o.ListenAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &HoldProxy{
		target:      target,
		ln:          ln,
		dialer:      net.Dialer{Control: loopbackOnly},
		dialTimeout: o.DialTimeout,
		ctx:         ctx,
		cancel:      cancel,
		conns:       make(map[net.Conn]bool),
	}
	p.wg.Go(p.serve)
	return p, nil
}

// Addr returns the proxy's listening address; clients connect to it instead of the
// target.
func (p *HoldProxy) Addr() string { return p.ln.Addr().String() }

// HoldNext arms the proxy: the first connection whose client sends bytes after
// HoldNext returns is held from those bytes on, until the returned Hold's Release.
// A HoldNext that no connection picked yet is replaced by the next one.
func (p *HoldProxy) HoldNext() *Hold {
	h := &Hold{held: make(chan struct{}), released: make(chan struct{}), done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		h.finish()
		return h
	}
	p.armed = h
	p.holds = append(p.holds, h)
	return h
}

// Close stops listening, closes every connection (held bytes are dropped), and
// returns once every goroutine of the proxy has exited. Calling it again does
// nothing.
func (p *HoldProxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	socks := make([]net.Conn, 0, len(p.conns))
	for s := range p.conns {
		socks = append(socks, s)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.cancel()
	for _, s := range socks {
		abort(s)
	}
	p.wg.Wait()
	p.mu.Lock()
	for _, h := range p.holds {
		h.finish()
	}
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("faultproxy: close: %w", err)
	}
	return nil
}

// track records an open socket for Close; it reports false (and closes s) when the
// proxy is closing.
func (p *HoldProxy) track(s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		abort(s)
		return false
	}
	p.conns[s] = true
	return true
}

func (p *HoldProxy) untrack(s net.Conn) {
	p.mu.Lock()
	delete(p.conns, s)
	p.mu.Unlock()
	_ = s.Close()
}

// pick returns the armed Hold, if any, and disarms the proxy.
func (p *HoldProxy) pick() *Hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.armed
	p.armed = nil
	return h
}

func (p *HoldProxy) serve() {
	for {
		cl, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of file descriptors): pause, then retry.
			t := time.NewTimer(5 * time.Millisecond)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		if !p.track(cl) {
			continue
		}
		p.wg.Go(func() { p.run(cl) })
	}
}

// holdChunk is the bytes of one read from the client, or the error that ended
// reading (err != nil), and the Hold that gates it (nil: forward at once).
type holdChunk struct {
	data []byte
	err  error
	gate *Hold
}

// holdQueue holds the chunks read from one connection's client, in order, until the
// server writer takes them.
type holdQueue struct {
	mu     sync.Mutex
	chunks []holdChunk
	notify chan struct{} // a token after a push
}

func newHoldQueue() *holdQueue { return &holdQueue{notify: make(chan struct{}, 1)} }

func (q *holdQueue) push(c holdChunk) {
	q.mu.Lock()
	q.chunks = append(q.chunks, c)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// next takes the first chunk, waiting for one; it reports false once ctx is done
// while the queue is empty.
func (q *holdQueue) next(ctx context.Context) (holdChunk, bool) {
	for {
		q.mu.Lock()
		if len(q.chunks) > 0 {
			c := q.chunks[0]
			q.chunks = q.chunks[1:]
			q.mu.Unlock()
			return c, true
		}
		q.mu.Unlock()
		select {
		case <-q.notify:
		case <-ctx.Done():
			return holdChunk{}, false
		}
	}
}

// run forwards one connection until both directions have ended.
func (p *HoldProxy) run(cl net.Conn) {
	defer p.untrack(cl)
	srv, ok := p.dial()
	if !ok {
		return
	}
	defer p.untrack(srv)
	q := newHoldQueue()
	var hold *Hold
	var wg sync.WaitGroup
	wg.Go(func() { hold = p.readClient(cl, q) })
	wg.Go(func() { p.writeServer(srv, q) })
	wg.Go(func() { forwardReplies(srv, cl) })
	wg.Wait()
	if hold != nil {
		hold.finish()
	}
}

// dial connects to the target for one client connection; it reports false when
// that failed or the proxy is closing.
func (p *HoldProxy) dial() (net.Conn, bool) {
	dctx, cancel := context.WithTimeout(p.ctx, p.dialTimeout)
	srv, err := p.dialer.DialContext(dctx, "tcp", p.target)
	cancel()
	if err != nil || !p.track(srv) {
		return nil, false
	}
	return srv, true
}

// readClient queues what the client sends until its side ends, and then the error
// that ended it. It never blocks on the server, so the client can close freely. The
// first chunk after a HoldNext picks this connection, if no other did: that chunk and
// every later one are gated by the Hold, which readClient returns (nil if none).
func (p *HoldProxy) readClient(cl net.Conn, q *holdQueue) *Hold {
	var hold *Hold
	buf := make([]byte, chunkSize)
	for {
		n, err := cl.Read(buf)
		if n > 0 {
			if hold == nil {
				hold = p.pick()
			}
			q.push(holdChunk{data: bytes.Clone(buf[:n]), gate: hold})
			if hold != nil {
				select {
				case <-hold.held:
				default:
					close(hold.held)
				}
			}
		}
		if err != nil {
			q.push(holdChunk{err: err, gate: hold})
			return hold
		}
	}
}

// writeServer writes the queued chunks to the server in order, each gated one once
// its Hold is released, and passes the end of the client's side on as a half-close.
// It stops when a write fails or the proxy closes.
func (p *HoldProxy) writeServer(srv net.Conn, q *holdQueue) {
	for {
		c, ok := q.next(p.ctx)
		if !ok {
			return
		}
		if c.gate != nil {
			select {
			case <-c.gate.released:
			case <-p.ctx.Done():
				return
			}
		}
		if c.err != nil {
			if tc, isTCP := srv.(*net.TCPConn); isTCP {
				_ = tc.CloseWrite()
			}
			return
		}
		if _, err := srv.Write(c.data); err != nil {
			return
		}
	}
}

// forwardReplies copies the server's replies to the client until the server's side
// ends, and passes that on: a half-close after EOF, else a close (which also ends
// readClient). Replies that cannot be written to the client are discarded.
func forwardReplies(srv, cl net.Conn) {
	buf := make([]byte, chunkSize)
	clientOK := true
	for {
		n, err := srv.Read(buf)
		if n > 0 && clientOK {
			if _, werr := cl.Write(buf[:n]); werr != nil {
				clientOK = false
			}
		}
		if err != nil {
			if tc, isTCP := cl.(*net.TCPConn); isTCP && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite()
			} else {
				_ = cl.Close() // unblocks the client reader
			}
			return
		}
	}
}
