package testenv

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// etcdFaultTimeout bounds each of ChangeLeader and LoseData.
const etcdFaultTimeout = 60 * time.Second

// etcdMember is one entry of an etcd member list.
type etcdMember struct {
	ID       uint64   `json:"ID,string"`
	Name     string   `json:"name"` // empty until an added member has started
	PeerURLs []string `json:"peerURLs"`
}

// etcdMembers returns the member list as the member at addr sees it.
func etcdMembers(ctx context.Context, addr string) ([]etcdMember, error) {
	var list struct {
		Members []etcdMember `json:"members"`
	}
	if err := etcdCall(ctx, addr, "/v3/cluster/member/list", &list); err != nil {
		return nil, err
	}
	return list.Members, nil
}

// memberID returns the etcd member ID of c.Members[i], as the running members see it.
func (c *EtcdCluster) memberID(ctx context.Context, i int) (uint64, error) {
	name := c.boot.memberName(i)
	c.boot.mu.Lock()
	peer := c.boot.peers[name]
	c.boot.mu.Unlock()
	var errs []error
	for _, s := range c.Members {
		if !s.Running() {
			continue
		}
		ms, err := etcdMembers(ctx, s.Addr())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range ms {
			for _, u := range m.PeerURLs {
				if u == peer {
					return m.ID, nil
				}
			}
		}
		return 0, fmt.Errorf("member %s (peer URL %s) is not in the member list %+v", name, peer, ms)
	}
	return 0, fmt.Errorf("no running member answered the member list: %w", errors.Join(errs...))
}

// retryEtcd calls f until it succeeds or ctx ends, pausing briefly between calls.
func retryEtcd(ctx context.Context, what string, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ChangeLeader moves leadership from the current leader to another running member
// (the next one after it in Members) with etcd's MoveLeader, and returns the new
// leader once every running member names it and it answers a linearizable read.
// It fails t on External members or when no other member is running.
func (c *EtcdCluster) ChangeLeader(t testing.TB) *Server {
	t.Helper()
	for _, s := range c.Members {
		s.mustOwn(t, "ChangeLeader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdFaultTimeout)
	defer cancel()
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatalf("testenv: ChangeLeader: %v", err)
	}
	var to = -1
	for i, s := range c.Members {
		if s == old {
			for k := 1; k < len(c.Members); k++ {
				if j := (i + k) % len(c.Members); c.Members[j].Running() {
					to = j
					break
				}
			}
		}
	}
	if to < 0 {
		t.Fatalf("testenv: ChangeLeader: no running member other than the leader %s", old)
	}
	target := c.Members[to]
	id, err := c.memberID(ctx, to)
	if err != nil {
		t.Fatalf("testenv: ChangeLeader: %v", err)
	}
	err = retryEtcd(ctx, "move leadership to "+target.String(), func() error {
		leader, err := c.Leader(ctx)
		if err != nil {
			return err
		}
		if leader == target {
			return nil
		}
		var out struct{}
		return etcdPost(ctx, leader.Addr(), "/v3/maintenance/transfer-leadership",
			map[string]string{"targetID": strconv.FormatUint(id, 10)}, &out)
	})
	if err == nil {
		err = retryEtcd(ctx, "a linearizable read on the new leader", func() error {
			if l, err := c.Leader(ctx); err != nil || l != target {
				return fmt.Errorf("leader %v, %v", l, err)
			}
			return etcdRead(ctx, target.Addr())
		})
	}
	if err != nil {
		t.Fatalf("testenv: ChangeLeader: %v", err)
	}
	return target
}

// etcdRead makes a linearizable read at addr (which needs a leader and a quorum).
func etcdRead(ctx context.Context, addr string) error {
	var out struct{}
	return etcdPost(ctx, addr, "/v3/kv/range",
		map[string]string{"key": base64.StdEncoding.EncodeToString([]byte("testenv-probe"))}, &out)
}

// LoseData makes member i lose its data and rejoin the cluster empty, as a machine
// replaced after a disk failure does, by etcd's documented procedure: it kills the
// member, removes it from the cluster through the others, deletes its data
// directory, adds it back (a new member ID, the same name and peer URL) and starts
// it, and returns once it has published itself and the cluster has a leader. The
// member catches up from the leader after that. The others must form a quorum
// without it. It fails t on External members.
func (c *EtcdCluster) LoseData(t testing.TB, i int) {
	t.Helper()
	for _, s := range c.Members {
		s.mustOwn(t, "LoseData")
	}
	if i < 0 || i >= len(c.Members) {
		t.Fatalf("testenv: LoseData(%d): the cluster has %d members", i, len(c.Members))
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdFaultTimeout)
	defer cancel()
	m := c.Members[i]
	name := c.boot.memberName(i)
	id, err := c.memberID(ctx, i)
	if err != nil {
		t.Fatalf("testenv: LoseData: %v", err)
	}
	m.Kill(t)
	var live *Server
	for _, s := range c.Members {
		if s != m && s.Running() {
			live = s
		}
	}
	if live == nil {
		t.Fatalf("testenv: LoseData(%d): no other member is running", i)
	}
	var out struct{}
	err = retryEtcd(ctx, "remove member "+name, func() error {
		err := etcdPost(ctx, live.Addr(), "/v3/cluster/member/remove", map[string]string{"ID": strconv.FormatUint(id, 10)}, &out)
		if err != nil {
			if ms, lerr := etcdMembers(ctx, live.Addr()); lerr == nil && !hasMember(ms, id) {
				return nil // an earlier attempt removed it
			}
		}
		return err
	})
	if err != nil {
		t.Fatalf("testenv: LoseData: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(m.Dir, "data")); err != nil {
		t.Fatalf("testenv: LoseData: %v", err)
	}
	c.boot.mu.Lock()
	peer := c.boot.peers[name]
	c.boot.rejoin[name] = true
	c.boot.mu.Unlock()
	err = retryEtcd(ctx, "add member "+name+" back", func() error {
		if ms, lerr := etcdMembers(ctx, live.Addr()); lerr == nil {
			for _, mb := range ms {
				for _, u := range mb.PeerURLs {
					if u == peer {
						return nil // an earlier attempt added it
					}
				}
			}
		}
		return etcdPost(ctx, live.Addr(), "/v3/cluster/member/add", map[string][]string{"peerURLs": {peer}}, &out)
	})
	if err != nil {
		t.Fatalf("testenv: LoseData: %v", err)
	}
	m.Restart(t)
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatalf("testenv: LoseData: %v", err)
	}
}

func hasMember(ms []etcdMember, id uint64) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}
