package lockd

import (
	"bufio"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dial connects to s and returns a function that sends one request line and returns
// the reply line (or the read error's text).
func dial(t *testing.T, s *Server) (conn net.Conn, ask func(req string) string) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	r := bufio.NewReader(c)
	return c, func(req string) string {
		if _, err := io.WriteString(c, req+"\n"); err != nil {
			return err.Error()
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return err.Error()
		}
		return strings.TrimSuffix(line, "\n")
	}
}

func TestProtocol(t *testing.T) {
	s, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	key, tok := b64.EncodeToString([]byte("a key\n")), b64.EncodeToString([]byte("tok"))

	_, ask := dial(t, s) // requests on one connection are answered in order
	require.Equal(t, "OK 1", ask("LOCK "+key+" "+tok+" 60000"))
	require.Equal(t, "LOCKED", ask("LOCK "+key+" "+b64.EncodeToString([]byte("other"))+" 60000"))
	require.Regexp(t, `^HELD 1 59\d\d\d$`, ask("INSPECT "+key))
	require.Equal(t, "OK", ask("RENEW "+key+" "+tok+" 1"))
	require.Equal(t, "OK", ask("UNLOCK "+key+" "+tok))
	require.Equal(t, "NOTHELD", ask("UNLOCK "+key+" "+tok))
	require.Equal(t, "FREE", ask("WAIT "+key))

	for req, reply := range map[string]string{
		"FOO":                              `ERR unknown request "FOO"`,
		"LOCK " + key:                      "ERR LOCK takes 3 arguments, not 1",
		"LOCK " + key + " " + tok + " 0":   `ERR bad ttl "0": want a positive number of milliseconds`,
		"LOCK " + key + " " + tok + " 1.5": `ERR bad ttl "1.5": want a positive number of milliseconds`,
		"UNLOCK a+b " + tok:                "ERR bad key: want 1 to 4096 bytes in base64url",
		"UNLOCK " + key + " =":             "ERR bad token: want 1 to 256 bytes in base64url",
		"INSPECT " + strings.Repeat("A", b64.EncodedLen(MaxKeyLen+1)): "ERR bad key: want 1 to 4096 bytes in base64url",
		"INSPECT " + strings.Repeat("A", maxLine):                     "ERR request line too long",
	} {
		c, ask := dial(t, s)
		require.Equal(t, reply, ask(req), "request %.40q", req)
		_, err := c.Read(make([]byte, 1)) // and the server hung up (EOF, or a reset)
		require.Error(t, err, "after the error reply to %.40q", req)
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the server did not hang up after the error reply to %.40q", req)
	}
}
