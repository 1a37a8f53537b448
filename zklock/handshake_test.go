package zklock

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// connectResponse encodes a ConnectResponse frame as a ZooKeeper server sends it.
func connectResponse(timeoutMs int32, session int64) []byte {
	passwd := make([]byte, 16)
	body := binary.BigEndian.AppendUint32(nil, 0) // protocolVersion
	body = binary.BigEndian.AppendUint32(body, uint32(timeoutMs))
	body = binary.BigEndian.AppendUint64(body, uint64(session))
	body = binary.BigEndian.AppendUint32(body, uint32(len(passwd)))
	body = append(body, passwd...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestHandshakeConnReadsTheGrant: the granted timeout is read from the first frame
// however the reads split it, everything passes through unchanged, and later frames
// (replies that happen to look alike) change nothing.
func TestHandshakeConnReadsTheGrant(t *testing.T) {
	for _, chunk := range []int{1, 3, 4, 7, 64} {
		s := &Session{}
		client, server := net.Pipe()
		hc := &handshakeConn{Conn: client, s: s}
		sent := append(connectResponse(4000, 0x1234), connectResponse(9000, 0x5678)...)
		go func() {
			_, _ = server.Write(sent)
			_ = server.Close()
		}()
		var got []byte
		buf := make([]byte, chunk)
		for {
			n, err := hc.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
		require.Equal(t, sent, got, "chunk %d: the bytes pass through", chunk)
		require.Equal(t, 4*time.Second, s.Timeout(), "chunk %d", chunk)
		least, most := s.bounds()
		require.Equal(t, 4*time.Second, least)
		require.Equal(t, 4*time.Second, most)
	}
}

func TestParseHandshake(t *testing.T) {
	d, ok := parseHandshake(connectResponse(30000, 1))
	require.True(t, ok)
	require.Equal(t, 30*time.Second, d)
	_, ok = parseHandshake(connectResponse(30000, 0))
	require.False(t, ok, "session id 0: the session expired, nothing granted")
	_, ok = parseHandshake(connectResponse(0, 1))
	require.False(t, ok, "no timeout")
	short := connectResponse(30000, 1)
	binary.BigEndian.PutUint32(short, 8)
	_, ok = parseHandshake(short)
	require.False(t, ok, "a frame too short for a ConnectResponse")
}

// TestSessionRecordsEveryGrant: the Session keeps the latest grant, the smallest and
// the largest.
func TestSessionRecordsEveryGrant(t *testing.T) {
	s := &Session{}
	for _, d := range []time.Duration{4 * time.Second, 2 * time.Second, 6 * time.Second} {
		s.record(d)
	}
	require.Equal(t, 6*time.Second, s.Timeout())
	least, most := s.bounds()
	require.Equal(t, 2*time.Second, least)
	require.Equal(t, 6*time.Second, most)
	// The bound counts the session timeout with the smallest grant and go-zookeeper's
	// ping interval (a third of the timeout) with the largest: 2s - 6s/3 - 200ms/2,
	// less than nothing: such a Session gives no lease at all (TryLock and Renew fail).
	require.Equal(t, -100*time.Millisecond, leaseBound(least, most, 200*time.Millisecond))
	// With distinct parts, each with its own weight: 9s - 12s/3 - 200ms/2.
	require.Equal(t, 4900*time.Millisecond, leaseBound(9*time.Second, 12*time.Second, 200*time.Millisecond))
}
