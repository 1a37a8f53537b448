package faultproxy_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync"
	"time"

	"github.com/distlock/distlock/faultproxy"
)

// ExampleProxy puts a Proxy between a client and a server (here a tiny echo server) and
// shows what the client sees during a cut, after Heal, and during a blackhole. In a
// real test the server is a backend started by internal/testenv and the client is the
// backend's client, configured with p.Addr() instead of the server's address.
func ExampleProxy() {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	var handlers sync.WaitGroup
	handlers.Go(func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			handlers.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c) // echo until the proxy closes its side
			})
		}
	})

	p, err := faultproxy.New(srv.Addr().String(), nil)
	if err != nil {
		log.Fatal(err)
	}

	// echo sends msg and waits up to wait for it to come back.
	echo := func(c net.Conn, msg string, wait time.Duration) string {
		_ = c.SetDeadline(time.Now().Add(wait))
		if _, err := io.WriteString(c, msg); err != nil {
			return "connection lost"
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); errors.Is(err, os.ErrDeadlineExceeded) {
			return "timed out"
		} else if err != nil {
			return "connection lost"
		}
		return string(buf)
	}

	c1, err := net.Dial("tcp", p.Addr())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("normal:", echo(c1, "ping", 5*time.Second))

	p.Cut() // resets c1 and refuses new connections
	fmt.Println("cut:", echo(c1, "ping", 5*time.Second))
	c1.Close()

	p.Heal()
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("healed:", echo(c2, "ping", 5*time.Second))

	p.Blackhole() // c2 stays open, but its bytes are lost
	fmt.Println("blackhole:", echo(c2, "ping", 200*time.Millisecond))

	p.Heal()
	fmt.Println("healed again:", echo(c2, "pong", 5*time.Second))
	c2.Close()

	// In a test: t.Cleanup(func() { p.Close() }), registered after the server's own
	// cleanup so that it runs first.
	if err := p.Close(); err != nil {
		log.Fatal(err)
	}
	srv.Close()
	handlers.Wait()

	// Output:
	// normal: ping
	// cut: connection lost
	// healed: ping
	// blackhole: timed out
	// healed again: pong
}
