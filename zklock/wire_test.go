package zklock_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// A wire counts the ZooKeeper requests that go through the connections its dialer
// makes, by opcode, and the round trips they take: a round starts with a request
// sent while no request is outstanding, so requests that are pipelined share one.
// Pings and the handshake are not counted.
type wire struct {
	mu          sync.Mutex
	ops         map[string]int
	rounds      int
	outstanding int
}

func newWire() *wire { return &wire{ops: make(map[string]int)} }

// dial wraps net.DialTimeout.
func (w *wire) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &wireConn{Conn: c, w: w}, nil
}

// reset zeroes the counts.
func (w *wire) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = make(map[string]int)
	w.rounds = 0
}

// snapshot returns the requests by opcode, in a stable text form, and the rounds.
func (w *wire) snapshot() (ops string, requests, rounds int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for op, n := range w.ops {
		parts = append(parts, fmt.Sprintf("%s=%d", op, n))
		requests += n
	}
	slices.Sort(parts)
	return strings.Join(parts, " "), requests, w.rounds
}

var opNames = map[int32]string{
	1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData", 8: "getChildren",
	9: "sync", 12: "getChildren2", 13: "check", 14: "multi", 19: "createContainer",
	21: "createTTL", 101: "setWatches", -11: "close",
}

// A wireConn splits the client's and the server's byte streams into frames (a
// 4-byte length, then xid and opcode for a request, xid for a reply). The first
// frame each way is the handshake. go-zookeeper writes from one goroutine and reads
// from another.
type wireConn struct {
	net.Conn
	w              *wire
	out, in        []byte
	outSeen, inSee bool // the handshake frame went by
}

func (c *wireConn) Write(p []byte) (int, error) {
	c.out = append(c.out, p...)
	for {
		body, ok := frame(&c.out)
		if !ok {
			break
		}
		if !c.outSeen {
			c.outSeen = true
			continue
		}
		xid, op := int32(binary.BigEndian.Uint32(body)), int32(binary.BigEndian.Uint32(body[4:]))
		if xid == -2 { // ping
			continue
		}
		c.w.mu.Lock()
		if c.w.outstanding == 0 {
			c.w.rounds++
		}
		c.w.outstanding++
		name, ok := opNames[op]
		if !ok {
			name = fmt.Sprint(op)
		}
		c.w.ops[name]++
		c.w.mu.Unlock()
	}
	return c.Conn.Write(p)
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in = append(c.in, p[:n]...)
	for {
		body, ok := frame(&c.in)
		if !ok {
			break
		}
		if !c.inSee {
			c.inSee = true
			continue
		}
		xid := int32(binary.BigEndian.Uint32(body))
		if xid == -2 || xid == -1 { // ping reply, watch event
			continue
		}
		c.w.mu.Lock()
		c.w.outstanding = max(0, c.w.outstanding-1)
		c.w.mu.Unlock()
	}
	return n, err
}

// frame takes the first whole frame off *buf and returns its body.
func frame(buf *[]byte) ([]byte, bool) {
	b := *buf
	if len(b) < 4 {
		return nil, false
	}
	n := int(binary.BigEndian.Uint32(b))
	if len(b) < 4+n {
		return nil, false
	}
	*buf = b[4+n:]
	return b[4 : 4+n], true
}
