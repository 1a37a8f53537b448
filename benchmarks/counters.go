package benchmarks

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/internal/testenv"
)

// counterTimeout bounds one reading of a server's counter.
const counterTimeout = 5 * time.Second

// A Counter reads a server's own count of the requests it received, so that W4
// and W5 report the cost of a handoff and of a renewal on the server, whatever
// the client library batches or pipelines.
type Counter struct {
	// Name says what is read ("INFO stats total_commands_processed", ...).
	Name string
	// Read returns the count now.
	Read func(ctx context.Context) (int64, error)
	// Lag is how long the server may take to count a request: a reading waits
	// that long after the events it must include.
	Lag time.Duration
}

// read waits what is left of c.Lag after waited (the time since the events it
// must include) and reads the counter; a nil Counter reads nothing.
func (c *Counter) read(ctx context.Context, waited time.Duration) (int64, error) {
	if c == nil {
		return 0, errors.New("no counter")
	}
	if d := c.Lag - waited; d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	rctx, cancel := context.WithTimeout(ctx, counterTimeout)
	defer cancel()
	return c.Read(rctx)
}

// redisCounter sums INFO stats total_commands_processed over the servers at
// addrs (the reading itself counts one command per server).
func redisCounter(addrs ...string) *Counter {
	return &Counter{
		Name: "Redis INFO stats total_commands_processed (a script counts once plus once per redis.call)",
		Read: func(ctx context.Context) (int64, error) {
			var sum int64
			for _, a := range addrs {
				v, err := testenv.RedisCommand(ctx, a, "INFO", "stats")
				if err != nil {
					return 0, err
				}
				s, _ := v.(string)
				n, err := field(s, "total_commands_processed:")
				if err != nil {
					return 0, err
				}
				sum += n
			}
			return sum, nil
		},
	}
}

// field returns the integer after prefix on a line of text.
func field(text, prefix string) (int64, error) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %q", strings.TrimSuffix(prefix, ":"))
}

// etcdCounter sums grpc_server_msg_received_total (every method, every type) of
// the /metrics of the member whose client address is addr.
func etcdCounter(addr string) *Counter {
	return &Counter{
		Name: "etcd /metrics grpc_server_msg_received_total (sum)",
		Read: func(ctx context.Context) (int64, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
			if err != nil {
				return 0, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
			}
			return sumMetric(resp.Body, "grpc_server_msg_received_total")
		},
	}
}

// sumMetric sums the samples of a Prometheus text-format metric.
func sumMetric(r io.Reader, name string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		sum, found = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("/metrics has no %s", name)
	}
	return int64(sum), nil
}

// zkCounter reads zk_packets_received of the mntr four-letter word (testenv's
// servers allow it in 4lw.commands.whitelist).
func zkCounter(addr string) *Counter {
	return &Counter{
		Name: "ZooKeeper mntr zk_packets_received",
		Read: func(ctx context.Context) (int64, error) {
			out, err := testenv.ZooKeeperCommand(ctx, addr, "mntr")
			if err != nil {
				return 0, err
			}
			return field(strings.ReplaceAll(out, "\t", " "), "zk_packets_received ")
		},
	}
}

// mysqlCounter reads SHOW GLOBAL STATUS LIKE 'Questions': the statements the
// clients sent.
func mysqlCounter(dsn string) *Counter {
	return &Counter{
		Name: "MariaDB SHOW GLOBAL STATUS Questions",
		Read: func(ctx context.Context) (int64, error) {
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				return 0, err
			}
			defer db.Close()
			var name string
			var n int64
			err = db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n)
			return n, err
		},
	}
}
