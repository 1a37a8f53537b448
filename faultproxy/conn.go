package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the largest chunk read from one side in one call.
const chunkSize = 32 << 10

// queueLen is how many chunks may wait (for their delay) per direction of a connection
// before the reader stops reading.
const queueLen = 64

// abort closes a connection with a reset (SO_LINGER 0) so that the peer sees an error
// at once.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// A conn is one proxied connection: the client's side and the target's side.
type conn struct {
	p      *Proxy
	ctx    context.Context // cancelled when the connection is shut down
	cancel context.CancelFunc

	mu     sync.Mutex
	client net.Conn
	server net.Conn // nil until dialled
	down   bool
}

// A chunk is the bytes of one Read, or the error that ended reading (err != nil).
type chunk struct {
	data []byte
	err  error
	at   time.Time // when it was read
}

func (c *conn) run() {
	defer c.p.wg.Done()
	defer c.p.forget(c)
	if c.p.cutByMatch(c.client) { // filter.go
		c.shutdown(true)
		return
	}

	dctx, cancel := context.WithTimeout(c.ctx, c.p.dialTimeout)
	srv, err := c.p.dialer.DialContext(dctx, "tcp", c.p.target)
	cancel()
	if err != nil {
		c.shutdown(true)
		return
	}
	if !c.setServer(srv) {
		abort(srv)
		return
	}

	toServer := make(chan chunk, queueLen)
	toClient := make(chan chunk, queueLen)
	var wg sync.WaitGroup
	wg.Go(func() { c.read(c.client, toServer) })
	wg.Go(func() { c.read(srv, toClient) })
	wg.Go(func() { c.write(srv, toServer, &c.p.toServer) })
	wg.Go(func() { c.write(c.client, toClient, &c.p.toClient) })
	wg.Wait()
	c.shutdown(false)
}

func (c *conn) setServer(s net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return false
	}
	c.server = s
	return true
}

// shutdown closes both sides (with a reset when abortive) and stops the connection's
// goroutines. It may be called any number of times.
func (c *conn) shutdown(abortive bool) {
	c.cancel()
	c.mu.Lock()
	if c.down {
		c.mu.Unlock()
		return
	}
	c.down = true
	sides := []net.Conn{c.client, c.server}
	c.mu.Unlock()
	for _, s := range sides {
		switch {
		case s == nil:
		case abortive:
			abort(s)
		default:
			_ = s.Close()
		}
	}
}

// aLongTimeAgo is a deadline in the past: setting it interrupts a blocked Write.
var aLongTimeAgo = time.Unix(1, 0)

// interruptWrites makes writes in progress on both sides return, so that the writers
// see a new blackhole at once.
func (c *conn) interruptWrites() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return
	}
	for _, s := range []net.Conn{c.client, c.server} {
		if s != nil {
			_ = s.SetWriteDeadline(aLongTimeAgo)
		}
	}
}

// read reads chunks from src and queues them for the writer, dropping them while
// blackholed (a stall holds them in the queue, whose bound stops the reading). Its last chunk carries the error that ended reading.
func (c *conn) read(src net.Conn, q chan<- chunk) {
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		now := time.Now()
		if n > 0 {
			if c.p.blackholed() {
				c.p.dropped.Add(int64(n))
			} else {
				select {
				case q <- chunk{data: bytes.Clone(buf[:n]), at: now}:
				case <-c.ctx.Done():
					return
				}
			}
		}
		if err != nil {
			select {
			case q <- chunk{err: err, at: now}:
			case <-c.ctx.Done():
			}
			return
		}
	}
}

// write writes queued chunks to dst, each once its delay has passed, dropping them while
// blackholed. At the end of the stream it half-closes dst (after EOF) or shuts the
// connection down (after an error), once no blackhole holds that back.
func (c *conn) write(dst net.Conn, q <-chan chunk, counter *atomic.Int64) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var ch chunk
		select {
		case ch = <-q:
		case <-c.ctx.Done():
			return
		}
		deliver, ok := c.await(ch, timer)
		if !ok {
			return
		}
		if !deliver {
			continue
		}
		if ch.err != nil {
			if errors.Is(ch.err, io.EOF) {
				if tc, isTCP := dst.(*net.TCPConn); isTCP {
					_ = tc.CloseWrite()
				}
				return
			}
			c.shutdown(true)
			return
		}
		if !c.writeAll(dst, ch.data, counter) {
			return
		}
	}
}

// await waits until ch is due. It reports deliver=false when ch was dropped by a
// blackhole, and ok=false when the connection is going down.
func (c *conn) await(ch chunk, timer *time.Timer) (deliver, ok bool) {
	for {
		m, delay, changed := c.p.state()
		switch m {
		case modeCut:
			c.shutdown(true)
			return false, false
		case modeBlackhole, modeStall:
			if m == modeBlackhole && ch.err == nil {
				c.p.dropped.Add(int64(len(ch.data)))
				return false, true
			}
			// A stall holds everything back, and a blackhole the end of the
			// stream, until it ends.
			select {
			case <-changed:
				continue
			case <-c.ctx.Done():
				return false, false
			}
		}
		wait := time.Until(ch.at.Add(delay))
		if wait <= 0 {
			return true, true
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-changed:
			timer.Stop()
		case <-c.ctx.Done():
			return false, false
		}
	}
}

// writeAll writes b to dst unless a blackhole starts, in which case the rest of b is
// dropped; a stall holds the rest of b back until it ends. It reports false when the
// connection is going down.
func (c *conn) writeAll(dst net.Conn, b []byte, counter *atomic.Int64) bool {
	for len(b) > 0 {
		if c.p.blackholed() {
			c.p.dropped.Add(int64(len(b)))
			return true
		}
		if stalled, changed := c.p.stalled(); stalled {
			select {
			case <-changed:
				continue
			case <-c.ctx.Done():
				return false
			}
		}
		n, err := dst.Write(b)
		counter.Add(int64(n))
		b = b[n:]
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && c.ctx.Err() == nil {
				// Interrupted by Blackhole (possibly already healed): clear the
				// deadline and look at the mode again.
				_ = dst.SetWriteDeadline(time.Time{})
				continue
			}
			c.shutdown(true)
			return false
		}
	}
	return true
}
