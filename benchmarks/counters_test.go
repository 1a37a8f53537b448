//go:build !matrix

package benchmarks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSumMetric(t *testing.T) {
	text := `# HELP grpc_server_msg_received_total Total number of RPC stream messages received on the server.
# TYPE grpc_server_msg_received_total counter
grpc_server_msg_received_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 12
grpc_server_msg_received_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 3.5e+01
grpc_server_msg_received_totally_other 1000
grpc_server_msg_sent_total{grpc_method="Range"} 99
`
	n, err := sumMetric(strings.NewReader(text), "grpc_server_msg_received_total")
	require.NoError(t, err)
	assert.EqualValues(t, 47, n)
	_, err = sumMetric(strings.NewReader("other 1\n"), "grpc_server_msg_received_total")
	assert.Error(t, err)
}

func TestField(t *testing.T) {
	n, err := field("# Stats\r\ntotal_connections_received:3\r\ntotal_commands_processed:1234\r\n", "total_commands_processed:")
	require.NoError(t, err)
	assert.EqualValues(t, 1234, n)
	mntr := "zk_version\t3.8.4\nzk_packets_received\t567\nzk_packets_sent\t600"
	n, err = field(strings.ReplaceAll(mntr, "\t", " "), "zk_packets_received ")
	require.NoError(t, err)
	assert.EqualValues(t, 567, n)
	_, err = field("x:1", "y:")
	assert.Error(t, err)
}

func TestCounterLag(t *testing.T) {
	c := &Counter{Lag: 50 * time.Millisecond, Read: func(context.Context) (int64, error) { return 7, nil }}
	start := time.Now()
	n, err := c.read(context.Background(), 0)
	require.NoError(t, err)
	assert.EqualValues(t, 7, n)
	assert.GreaterOrEqual(t, time.Since(start), c.Lag)
	start = time.Now()
	_, _ = c.read(context.Background(), time.Second) // waited long enough already
	assert.Less(t, time.Since(start), c.Lag)
	var none *Counter
	_, err = none.read(context.Background(), 0)
	assert.Error(t, err)
}
