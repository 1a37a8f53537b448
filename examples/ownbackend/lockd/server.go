package lockd

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// MaxKeyLen is the longest key, in bytes, that the server accepts.
	MaxKeyLen = 4096
	// MaxTokenLen is the longest token, in bytes, that the server accepts.
	MaxTokenLen = 256
)

// maxLine bounds a request line: a verb, the longest key and token, and a ttl.
var maxLine = 64 + b64.EncodedLen(MaxKeyLen) + b64.EncodedLen(MaxTokenLen)

var b64 = base64.RawURLEncoding

// A Server is a running lock server. Its methods are safe for concurrent use.
type Server struct {
	tab  *table
	addr string // where it listens, kept across Restart

	mu     sync.Mutex
	ln     net.Listener // nil while restarting and after Close
	conns  map[net.Conn]struct{}
	stop   chan struct{} // closed to end the current listener's connections
	paused chan struct{} // non-nil while paused; closed by Resume
	closed bool
	wg     sync.WaitGroup // the accept loop and the connection handlers
}

// Listen starts a server on addr (host:port; port 0 picks a free one) with an empty
// table. The caller must Close it.
func Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{tab: newTable(), addr: ln.Addr().String(), conns: make(map[net.Conn]struct{})}
	s.mu.Lock()
	s.start(ln)
	s.mu.Unlock()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Pause makes the server stop answering, as SIGSTOP would: connections are still
// accepted and requests read, but none is handled until Resume. Its clock runs on,
// so leases expire meanwhile.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused == nil {
		s.paused = make(chan struct{})
	}
}

// Resume ends a Pause: the requests that waited are handled, in order per connection.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resume()
}

// Restart stops listening, closes every connection (ending a Pause) and listens again
// on the same address with the same table, as a server with durable state does
// after a restart. It returns once the server accepts connections again.
func (s *Server) Restart() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.shutdown()
	s.mu.Unlock()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("lockd: restart: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = ln.Close()
		return net.ErrClosed
	}
	s.start(ln)
	return nil
}

// Close stops the server and returns once every goroutine it started has exited. The
// table is dropped. Calling it again does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.shutdown()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// start serves ln. Called with s.mu held.
func (s *Server) start(ln net.Listener) {
	s.ln = ln
	s.stop = make(chan struct{})
	stop := s.stop
	s.wg.Go(func() { s.accept(ln, stop) })
}

// shutdown closes the listener and every connection and ends waits. Called with s.mu
// held.
func (s *Server) shutdown() {
	if s.ln != nil {
		_ = s.ln.Close()
		s.ln = nil
	}
	for c := range s.conns {
		_ = c.Close()
	}
	if s.stop != nil {
		close(s.stop)
		s.stop = nil
	}
	s.resume()
}

// resume ends a Pause. Called with s.mu held.
func (s *Server) resume() {
	if s.paused != nil {
		close(s.paused)
		s.paused = nil
	}
}

func (s *Server) accept(ln net.Listener, stop chan struct{}) {
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// A transient failure (out of file descriptors, say): the listener
			// still works; pause a moment, as net/http does, rather than spin.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.stop != stop { // restarted or closed meanwhile
			s.mu.Unlock()
			_ = c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Go(func() { s.serve(c, stop) })
		s.mu.Unlock()
	}
}

// serve answers the requests of one connection, in order, until it closes.
func (s *Server) serve(c net.Conn, stop <-chan struct{}) {
	defer func() {
		_ = c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	r := bufio.NewReaderSize(c, maxLine)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			_, _ = io.WriteString(c, "ERR request line too long\n")
			return
		}
		if err != nil {
			return
		}
		req := string(line[:len(line)-1])
		if !s.awaitResume(stop) {
			return
		}
		reply := s.handle(req, stop)
		if _, err := io.WriteString(c, reply+"\n"); err != nil || strings.HasPrefix(reply, "ERR") {
			return
		}
	}
}

// awaitResume blocks while the server is paused; it reports false when the
// connection must end instead.
func (s *Server) awaitResume(stop <-chan struct{}) bool {
	s.mu.Lock()
	p := s.paused
	s.mu.Unlock()
	if p == nil {
		return true
	}
	select {
	case <-p:
		return true
	case <-stop:
		return false
	}
}

// handle returns the reply to one request line.
func (s *Server) handle(line string, stop <-chan struct{}) string {
	verb, rest, _ := strings.Cut(line, " ")
	a, err := parse(verb, strings.Split(rest, " "))
	if err != nil {
		return "ERR " + err.Error()
	}
	switch verb {
	case "LOCK":
		fence, err := s.tab.lock(a.key, a.token, a.ttl)
		if err != nil {
			return err.Error()
		}
		return "OK " + strconv.FormatUint(fence, 10)
	case "RENEW":
		return status(s.tab.renew(a.key, a.token, a.ttl))
	case "UNLOCK":
		return status(s.tab.unlock(a.key, a.token))
	case "CANCEL":
		s.tab.cancel(a.key, a.token, a.ttl)
		return "OK"
	case "INSPECT":
		fence, left, err := s.tab.inspect(a.key)
		if err != nil {
			return "FREE"
		}
		return fmt.Sprintf("HELD %d %d", fence, left.Milliseconds())
	default: // WAIT
		if freed, left, ok := s.tab.watch(a.key); ok {
			t := time.NewTimer(left)
			defer t.Stop()
			select {
			case <-freed:
			case <-t.C:
			case <-stop:
			}
		}
		return "FREE"
	}
}

func status(err error) string {
	if err != nil {
		return err.Error()
	}
	return "OK"
}

// args are a request's decoded arguments.
type args struct {
	key, token string
	ttl        time.Duration
}

// parse decodes the arguments of verb: key, then token, then ttl, as many as the
// verb takes.
func parse(verb string, f []string) (args, error) {
	var a args
	n := 0
	switch verb {
	case "LOCK", "RENEW", "CANCEL":
		n = 3
	case "UNLOCK":
		n = 2
	case "INSPECT", "WAIT":
		n = 1
	default:
		return a, fmt.Errorf("unknown request %.16q", verb)
	}
	if len(f) != n {
		return a, fmt.Errorf("%s takes %d arguments, not %d", verb, n, len(f))
	}
	key, err := b64.DecodeString(f[0])
	if err != nil || len(key) == 0 || len(key) > MaxKeyLen {
		return a, fmt.Errorf("bad key: want 1 to %d bytes in base64url", MaxKeyLen)
	}
	a.key = string(key)
	if n >= 2 {
		tok, err := b64.DecodeString(f[1])
		if err != nil || len(tok) == 0 || len(tok) > MaxTokenLen {
			return a, fmt.Errorf("bad token: want 1 to %d bytes in base64url", MaxTokenLen)
		}
		a.token = string(tok)
	}
	if n == 3 {
		ms, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || ms <= 0 {
			return a, fmt.Errorf("bad ttl %.24q: want a positive number of milliseconds", f[2])
		}
		a.ttl = time.Duration(math.MaxInt64) // at least as long as asked
		if ms <= math.MaxInt64/int64(time.Millisecond) {
			a.ttl = time.Duration(ms) * time.Millisecond
		}
	}
	return a, nil
}
