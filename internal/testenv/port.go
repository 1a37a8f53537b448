package testenv

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago: it
// listens on 127.0.0.1:0 n times (all listeners open at once, so the ports are
// distinct), then closes the listeners. Another process may take a port before the
// caller binds it; StartProcess therefore retries a server that exits early with new
// ports.
func FreePorts(n int) ([]int, error) {
	if n <= 0 {
		return nil, fmt.Errorf("testenv: FreePorts(%d): n must be positive", n)
	}
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testenv: find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreePort returns one TCP port on 127.0.0.1 that was free a moment ago (see FreePorts).
func FreePort() (int, error) {
	ps, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}
