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
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

// wire is the driver.Driver of a Locker: one request per operation, each on a
// connection of its own.
type wire struct {
	addr    string
	timeout time.Duration // Options.Timeout
}

var (
	_ driver.Driver    = (*wire)(nil)
	_ driver.Inspector = (*wire)(nil)
)

// maxTokenLen is the longest token the server accepts.
const maxTokenLen = 256

func (w *wire) Acquire(ctx context.Context, key, token string, ttl time.Duration) (uint64, error) {
	reply, sent, err := w.roundTrip(ctx, ttl, request("LOCK", key, token, ttl))
	if !sent {
		return 0, driver.NotSent(err)
	}
	if err != nil {
		return 0, err
	}
	if reply == "LOCKED" {
		return 0, distlock.ErrLocked
	}
	if f, ok := strings.CutPrefix(reply, "OK "); ok {
		if fence, err := strconv.ParseUint(f, 10, 64); err == nil {
			return fence, nil
		}
	}
	return 0, errProtocol(reply)
}

func (w *wire) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) error {
	return w.status(ctx, ttl, request("RENEW", lease.Key, lease.Token, ttl), lease.Token)
}

func (w *wire) Release(ctx context.Context, lease distlock.Lease) error {
	return w.status(ctx, 0, request("UNLOCK", lease.Key, lease.Token, 0), lease.Token)
}

// Abandon sends CANCEL: it releases key if the LOCK made it ours, and otherwise
// makes the server refuse the LOCK if it is still on its way. Each attempt gets at
// most a second, so that one lost in a partition does not use up the clean-up's
// time.
func (w *wire) Abandon(ctx context.Context, key, token string, ttl time.Duration, _ error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	reply, _, err := w.roundTrip(ctx, 0, request("CANCEL", key, token, ttl))
	if err == nil && reply != "OK" {
		err = errProtocol(reply)
	}
	return err
}

// Inspect reads key's holder: the server's remaining time, and no owner label.
func (w *wire) Inspect(ctx context.Context, key string) (distlock.Holder, time.Duration, error) {
	reply, _, err := w.roundTrip(ctx, 0, request("INSPECT", key, "", 0))
	if err != nil {
		return distlock.Holder{}, 0, err
	}
	if reply == "FREE" {
		return distlock.Holder{}, 0, distlock.ErrNotHeld
	}
	var fence uint64
	var ms int64
	if _, err := fmt.Sscanf(reply, "HELD %d %d", &fence, &ms); err != nil {
		return distlock.Holder{}, 0, errProtocol(reply)
	}
	return distlock.Holder{Fence: fence}, time.Duration(ms) * time.Millisecond, nil
}

// status sends a request answered OK or NOTHELD.
func (w *wire) status(ctx context.Context, ttl time.Duration, req, token string) error {
	if len(token) > maxTokenLen {
		return fmt.Errorf("%w: Lease with a token of %d bytes (at most %d)", distlock.ErrInvalid, len(token), maxTokenLen)
	}
	reply, _, err := w.roundTrip(ctx, ttl, req)
	switch {
	case err != nil:
		return err
	case reply == "OK":
		return nil
	case reply == "NOTHELD":
		return distlock.ErrNotHeld
	}
	return errProtocol(reply)
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

// roundTrip sends req on a new connection and returns the reply line. Its deadline
// is the earliest of Options.Timeout, ttl (when > 0) and ctx's deadline. sent
// reports whether any of the request may have reached the server.
func (w *wire) roundTrip(ctx context.Context, ttl time.Duration, req string) (reply string, sent bool, err error) {
	deadline := time.Now().Add(w.timeout)
	if ttl > 0 {
		deadline = time.Now().Add(min(ttl, w.timeout))
	}
	if cd, ok := ctx.Deadline(); ok && cd.Before(deadline) {
		deadline = cd
	}
	d := net.Dialer{Deadline: deadline}
	conn, err := d.DialContext(ctx, "tcp", w.addr)
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
		return fmt.Errorf("no reply by the request's deadline: %w", err)
	}
	return err
}

// errProtocol reports a reply the client does not understand.
func errProtocol(reply string) error {
	return fmt.Errorf("unexpected reply %.64q from lockd", reply)
}
