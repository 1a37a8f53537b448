package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// reachTimeout bounds reachAny's dial of one address.
const reachTimeout = 5 * time.Second

// reachAny dials every address (TCP) at once and returns nil as soon as one
// accepts, closing what it dialed. When none does, it returns an error that says
// why for each ("connect: connection refused"). The ZooKeeper and etcd clients
// retry unreachable servers in the background until their caller gives up, so
// without this a server that is not running is reported only as a deadline
// exceeded, 15s later.
func reachAny(ctx context.Context, what string, addrs []string) error {
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	errs := make(chan error, len(addrs))
	var d net.Dialer
	for _, a := range addrs {
		go func() {
			c, err := d.DialContext(ctx, "tcp", a)
			if err == nil {
				c.Close()
			}
			errs <- err
		}()
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

// An unreachableError says that no server of a backend accepted a connection.
type unreachableError struct {
	what string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("%s: no server reachable: %s", e.what, oneLine(e.err))
}

func (e *unreachableError) Unwrap() error { return e.err }
