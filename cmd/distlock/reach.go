package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// reachTimeout bounds reachAny's dial (and TLS handshake) of one address.
const reachTimeout = 5 * time.Second

// reachAny dials every address (TCP, and the TLS handshake when tlsCfg is not
// nil) at once and returns nil when one of them answers, closing what it dialed.
// When none does, it returns an error that says why for each ("connect:
// connection refused", "certificate signed by unknown authority"). The ZooKeeper,
// etcd and Redis clients retry in the background until their caller gives up, so
// without this a server that is not running, or whose certificate does not verify,
// is reported only as a deadline exceeded, seconds later.
func reachAny(ctx context.Context, what string, addrs []string, tlsCfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	errs := make(chan error, len(addrs))
	for _, a := range addrs {
		go func() { errs <- reach(ctx, a, tlsCfg) }()
	}
	var failed []error
	reached := false
	for range addrs {
		err := <-errs
		if err == nil && !reached {
			reached = true
			cancel() // the other dials end at once
		}
		if err != nil {
			failed = append(failed, err)
		}
	}
	if reached {
		return nil
	}
	return &unreachableError{what: what, err: errors.Join(failed...)}
}

// reach dials addr, and shakes hands over TLS when tlsCfg is not nil.
func reach(ctx context.Context, addr string, tlsCfg *tls.Config) error {
	var c net.Conn
	var err error
	if tlsCfg == nil {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = (&tls.Dialer{Config: tlsCfg}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return err
	}
	return c.Close()
}

// An unreachableError says that no server of a backend accepted a connection.
type unreachableError struct {
	what string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("%s: no server reachable: %s", e.what, oneLine(e.err))
}

func (e *unreachableError) Unwrap() error { return e.err }
