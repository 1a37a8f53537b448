package zklock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/go-zookeeper/zk"
)

// How a request's error is read: did the connection break (retry; the request may
// have been applied), or did the request fail for good?
//
// go-zookeeper reports a connection that breaks under a request in two ways. The
// requests waiting for an answer, and those queued behind, get zk.ErrConnectionClosed
// (or zk.ErrNoServer while no server can be reached). But the request whose write
// fails (the connection was reset, its peer went away, the write timed out) gets the
// write's own error, a *net.OpError such as "write: connection reset by peer" or
// "broken pipe", and the connection is then closed and reconnected as for any other
// break. That is what a request meets when it is written just as a partition begins,
// before go-zookeeper has noticed: it must count as a broken connection, not as an
// answer.

// connBroke reports whether a request failed because the connection broke under
// it: the request may or may not have been applied.
func connBroke(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || transportError(err)
}

// retriable reports whether a request failed because the connection broke (the
// request may or may not have been applied) or could not be sent.
func retriable(err error) bool {
	return connBroke(err) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved)
}

// transportError reports whether err is the connection's own error (a failed write
// on it), not an answer of ZooKeeper's or of go-zookeeper's. A context's error is
// not one, though context.DeadlineExceeded is a net.Error.
func transportError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// asConnClosed returns err, made to wrap zk.ErrConnectionClosed as well if it is a
// transport error: the error that a caller sees says that the outcome is unknown
// however go-zookeeper reported the break.
func asConnClosed(err error) error {
	if transportError(err) && !errors.Is(err, zk.ErrConnectionClosed) {
		return fmt.Errorf("%w: %w", zk.ErrConnectionClosed, err)
	}
	return err
}

// A retryError is an Acquire's error after which no node of the attempt exists:
// its request was not sent, or the session that would own its node had expired.
// The core may try again (see ops.Retryable).
type retryError struct{ err error }

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

func retryable(err error) error { return &retryError{err} }
