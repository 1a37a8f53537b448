package faultproxy_test

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"
)

func TestStallHoldsBytesUntilHeal(t *testing.T) {
	ln := listen(t)
	p := newProxy(t, ln.Addr().String())
	c, s := pair(t, p, ln)
	send(t, c, "ping")
	expect(t, s, "ping")

	p.Stall()
	send(t, c, "to server")
	expectSilent(t, s, silence)
	send(t, s, "to client")
	expectSilent(t, c, silence)
	// A close is held back in order, like any other packet.
	c2, s2 := pair(t, p, ln)
	send(t, c2, "last words")
	c2.Close()
	expectSilent(t, s2, silence)

	p.Heal()
	send(t, c, ", and after")
	expect(t, s, "to server, and after") // nothing lost, in order
	expect(t, c, "to client")
	expect(t, s2, "last words")
	expectClosed(t, s2)
	if st := p.Stats(); st.BytesDropped != 0 {
		t.Errorf("Stats = %+v: a stall dropped bytes", st)
	}
}

func TestStallInterruptsBlockedWriteAndLosesNothing(t *testing.T) {
	ln := listen(t)
	p := newProxy(t, ln.Addr().String())
	c, s := pair(t, p, ln)

	payload := make([]byte, 16<<20) // far more than the socket buffers and the queue hold
	rand.Read(payload)
	go func() {
		c.SetWriteDeadline(time.Now().Add(opTimeout))
		c.Write(payload) // blocks during the stall: the proxy stops reading
	}()
	waitFor(t, "the proxy to start writing", func() bool { return p.Stats().BytesToServer > 0 })
	p.Stall()
	// Nothing more reaches the server once Stall returned, apart from what the
	// kernel had already.
	s.SetReadDeadline(time.Now().Add(opTimeout))
	got := make([]byte, 0, len(payload))
	buf := make([]byte, 64<<10)
	readFor := func(d time.Duration) {
		s.SetReadDeadline(time.Now().Add(d))
		for len(got) < len(payload) {
			n, err := s.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				return
			}
		}
	}
	readFor(silence)
	during := len(got)
	readFor(silence)
	if len(got) != during {
		t.Fatalf("the server read %d more bytes while stalled", len(got)-during)
	}
	p.Heal()
	readFor(opTimeout)
	if !bytes.Equal(got, payload) {
		t.Fatalf("the server got %d bytes, want the %d-byte payload intact", len(got), len(payload))
	}
	t.Logf("%d of %d bytes were through before the stall", during, len(payload))
}
