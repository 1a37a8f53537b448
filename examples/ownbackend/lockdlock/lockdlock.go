// Package lockdlock is a distlock backend over a lockd server (package lockd): a
// distlock.Locker, Waiter and Inspector that talks lockd's line protocol over TCP.
// Its test proves it with the whole conformance suite, faults included; read it as
// an example of what the author of a backend writes.
//
// Each call opens its own connection, so that no connection state survives a server
// restart or a cut, and closes it when the call returns. A call's deadline is the
// earliest of its context's deadline and Options.Timeout; TryLock and Renew also give
// up at start + ttl, since a reply after that is useless (the Lease would already
// have expired). A TryLock that gave up after sending its request removes the lock it
// may have made, in the background, with a fresh bounded context (see
// Options.CleanupTimeout); the server refuses that request if it arrives after the
// clean-up.
package lockdlock

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// MaxKeyLen is the longest key, in bytes, that a Locker accepts (the server's limit).
const MaxKeyLen = 4096

// maxTokenLen is the longest token the server accepts.
const maxTokenLen = 256

// Backend is the name in every error's distlock.OpError.
const Backend = "lockdlock"

// Options configure a Locker. A nil *Options means the defaults.
type Options struct {
	// Timeout bounds every call whose context has no earlier deadline. Zero means 5s.
	Timeout time.Duration
	// CleanupTimeout bounds the removal of a lock that an abandoned TryLock may have
	// made. Zero means 5s.
	CleanupTimeout time.Duration
}

// A Locker is a client of one lockd server. It is safe for concurrent use.
type Locker struct {
	addr string
	opts Options

	mu       sync.Mutex
	closed   bool
	cleanups sync.WaitGroup
}

var (
	_ distlock.Locker    = (*Locker)(nil)
	_ distlock.Waiter    = (*Locker)(nil)
	_ distlock.Inspector = (*Locker)(nil)
)

// New returns a Locker for the lockd server at addr (host:port). It does not connect:
// every call dials. Bad options give an error wrapping distlock.ErrInvalid.
func New(addr string, opts *Options) (*Locker, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fail("New", "", fmt.Errorf("%w: address %q: %v", distlock.ErrInvalid, addr, err))
	}
	if o.Timeout < 0 || o.CleanupTimeout < 0 {
		return nil, fail("New", "", fmt.Errorf("%w: negative Options.Timeout %v or CleanupTimeout %v", distlock.ErrInvalid, o.Timeout, o.CleanupTimeout))
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.CleanupTimeout == 0 {
		o.CleanupTimeout = 5 * time.Second
	}
	return &Locker{addr: addr, opts: o}, nil
}

// Close makes every later call fail with an error wrapping distlock.ErrClosed, and
// returns once the clean-ups of abandoned TryLocks have finished (each bounded by
// Options.CleanupTimeout). Calls in flight run to their end (a TryLock among them
// that gives up leaves its lock to expire). Calling it again does nothing.
func (l *Locker) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cleanups.Wait()
	return nil
}

// fail wraps err in the *distlock.OpError every call returns.
func fail(op, key string, err error) error {
	return &distlock.OpError{Backend: Backend, Op: op, Key: key, Err: err}
}

var b64 = base64.RawURLEncoding

// request formats a request line: verb, key and token in base64url, and the ttl in
// milliseconds, rounded up (the server holds a key at least as long as asked).
func request(verb, key, token string, ttl time.Duration) string {
	req := verb + " " + b64.EncodeToString([]byte(key))
	if token != "" {
		req += " " + b64.EncodeToString([]byte(token))
	}
	if ttl > 0 {
		ms := ttl.Milliseconds()
		if time.Duration(ms)*time.Millisecond < ttl {
			ms++
		}
		req += " " + strconv.FormatInt(ms, 10)
	}
	return req
}

// deadline returns a call's deadline: the earliest of start + Timeout, start + ttl
// (when ttl > 0) and ctx's deadline.
func (l *Locker) deadline(ctx context.Context, start time.Time, ttl time.Duration) time.Time {
	d := start.Add(l.opts.Timeout)
	if ttl > 0 && start.Add(ttl).Before(d) {
		d = start.Add(ttl)
	}
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return d
}

// roundTrip sends req on a new connection and returns the reply line. sent reports
// whether any of the request may have reached the server. It refuses to start once
// the Locker is closed, unless cleanup is set.
func (l *Locker) roundTrip(ctx context.Context, deadline time.Time, req string, cleanup bool) (reply string, sent bool, err error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed && !cleanup {
		return "", false, distlock.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	d := net.Dialer{Deadline: deadline}
	conn, err := d.DialContext(ctx, "tcp", l.addr)
	if err != nil {
		return "", false, why(ctx, deadline, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(conn, req+"\n"); err != nil {
		return "", true, why(ctx, deadline, err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", true, why(ctx, deadline, err)
	}
	return strings.TrimSuffix(line, "\n"), true, nil
}

// why explains a failed round trip: the context's error when the context ended (or
// its deadline was the one that passed), else the transport's.
func why(ctx context.Context, deadline time.Time, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if cd, ok := ctx.Deadline(); ok && !cd.After(deadline) {
			return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
		}
		return fmt.Errorf("no reply by the call's deadline: %w", err)
	}
	return err
}

// errProtocol reports a reply the client does not understand.
func errProtocol(reply string) error {
	return fmt.Errorf("unexpected reply %.64q from lockd", reply)
}

// errLate reports a reply that came after the lease it grants had expired.
var errLate = errors.New("the reply came after the ttl: the lease had already expired")
