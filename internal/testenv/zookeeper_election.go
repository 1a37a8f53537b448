package testenv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// ZooKeeper's leader election keeps one TCP connection between every two nodes. A
// node that opens one sends its server id and its own election address first; when
// the receiver has the higher id it drops the connection and dials back, to the
// address it was sent, not to the one in its own configuration
// (QuorumCnxManager.handleConnection). Through fault proxies that address would
// bypass them. An electionRewriter sits in front of a node's election port and
// rewrites that address to the wildcard 0.0.0.0, which the receiver ignores
// (InitialMessage.parse skips wildcard addresses): it then dials back through its
// configuration, that is through its own proxy.

// The protocol versions of the election's initial message (QuorumCnxManager).
const (
	zkElectionProtocolV1 = -65536
	zkElectionProtocolV2 = -65535
	// zkMaxElectionAddrs bounds the address list of an initial message.
	zkMaxElectionAddrs = 4096
	// zkHandshakeTimeout bounds reading an initial message.
	zkHandshakeTimeout = 30 * time.Second
)

// An electionRewriter forwards every connection it accepts to target, rewriting the
// sender's address in the connection's initial message. Close stops it.
type electionRewriter struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// newElectionRewriter listens on the loopback address listen and forwards to target.
func newElectionRewriter(listen, target string) (*electionRewriter, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("testenv: election rewriter for %s: %w", target, err)
	}
	r := &electionRewriter{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr returns the address that peers dial instead of target.
func (r *electionRewriter) Addr() string { return r.ln.Addr().String() }

// Close stops listening, closes every connection and waits for its goroutines.
func (r *electionRewriter) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

// track records c so that Close closes it, and reports false after Close. A
// handler goroutine is counted in wg under the same lock, so Close's Wait sees it.
func (r *electionRewriter) track(c net.Conn, handler bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	if handler {
		r.wg.Add(1)
	}
	return true
}

func (r *electionRewriter) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

func (r *electionRewriter) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // a transient accept error (EMFILE): retry
			continue
		}
		if !r.track(c, true) {
			c.Close()
			return
		}
		go r.handle(c)
	}
}

// handle forwards one connection: the initial message rewritten, then everything
// else as it is, in both directions, until either side closes.
func (r *electionRewriter) handle(c net.Conn) {
	defer r.wg.Done()
	defer r.untrack(c)
	s, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		return
	}
	if !r.track(s, false) {
		s.Close()
		return
	}
	defer r.untrack(s)
	c.SetReadDeadline(time.Now().Add(zkHandshakeTimeout))
	first, err := readElectionHandshake(c)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	if _, err := s.Write(first); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(s, c)
		s.Close()
		c.Close()
	}()
	io.Copy(c, s)
	c.Close()
	s.Close()
	<-done
}

// readElectionHandshake reads the initial message of an election connection from c
// and returns it with every address replaced by 0.0.0.0 (same port). A message of
// an unknown protocol (the old one starts with the server id) is returned as read.
func readElectionHandshake(c io.Reader) ([]byte, error) {
	var head [8]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return nil, err
	}
	version := int64(binary.BigEndian.Uint64(head[:]))
	if version != zkElectionProtocolV1 && version != zkElectionProtocolV2 {
		return head[:], nil
	}
	var rest [12]byte // server id, length of the address list
	if _, err := io.ReadFull(c, rest[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(rest[8:])
	if n == 0 || n > zkMaxElectionAddrs {
		return nil, fmt.Errorf("election handshake: address list of %d bytes", n)
	}
	addrs := make([]byte, n)
	if _, err := io.ReadFull(c, addrs); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Write(head[:])
	out.Write(rest[:8])
	list := strings.Split(string(addrs), "|")
	for i, a := range list {
		if k := strings.LastIndexByte(a, ':'); k >= 0 {
			list[i] = "0.0.0.0" + a[k:]
		}
	}
	rewritten := strings.Join(list, "|")
	binary.Write(&out, binary.BigEndian, uint32(len(rewritten)))
	out.WriteString(rewritten)
	return out.Bytes(), nil
}
