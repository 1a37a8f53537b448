package etcdlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestDropExpired: a full pool drops its expired spares, of every TTL, and keeps
// the live ones in their order.
func TestDropExpired(t *testing.T) {
	now := time.Now()
	p := leasePool{spares: map[int64][]leaseInfo{}}
	for i := range maxSpares {
		secs := int64(1 + i%3)
		at := now.Add(-2 * time.Second) // expired for secs 1 and 2
		if i%4 == 0 {
			at = now // live
		}
		p.spares[secs] = append(p.spares[secs], leaseInfo{id: clientv3.LeaseID(i + 1), secs: secs, ttl: time.Duration(secs) * time.Second, at: at})
		p.n++
	}
	p.dropExpired(now)
	n := 0
	for secs, list := range p.spares {
		var last clientv3.LeaseID
		for _, sp := range list {
			require.True(t, now.Before(sp.expiry()), "spare %d of %ds kept after its expiry", sp.id, secs)
			require.Greater(t, sp.id, last, "order")
			last = sp.id
		}
		n += len(list)
	}
	require.Equal(t, n, p.n)
	require.Less(t, p.n, maxSpares)
}
