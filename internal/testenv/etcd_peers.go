package testenv

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/distlock/distlock/faultproxy"
)

// EtcdProxiedCluster is EtcdCluster, except that each member's peer (raft) traffic
// goes through a fault proxy of its own: every member advertises its proxy's
// address as its peer URL, so every peer connection to member i passes through
// proxy i. Isolate uses the proxies to cut one member off from its peers while
// its clients still reach it. Client traffic is not proxied.
//
// If DISTLOCK_ETCD_ENDPOINTS is set, it returns the External members instead, as
// EtcdCluster does; Isolate then fails the test.
func (e *Env) EtcdProxiedCluster(n int) (*EtcdCluster, error) {
	return e.etcdCluster(n, true)
}

// closeProxies stops the members, then closes their peer proxies: a member that
// stops while its peers cannot reach it waits for them.
func (b *etcdBoot) closeProxies() {
	b.mu.Lock()
	servers := append([]*Server(nil), b.servers...)
	proxies := make([]*faultproxy.Proxy, 0, len(b.proxies))
	for _, p := range b.proxies {
		proxies = append(proxies, p)
	}
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { _ = s.Stop() }) // Env.close stops them again and reports errors
	}
	wg.Wait()
	for _, p := range proxies {
		_ = p.Close()
	}
}

// Isolate cuts member i off from its peers until the returned heal is called, or
// the test ends: every peer connection to or from member i is reset, and new ones
// are refused, in both directions, while clients still reach member i at its Addr.
// It returns at once; the members notice as etcd does (a follower loses its
// leader after an election timeout, an isolated leader steps down within two
// (CheckQuorum), and the others elect a leader: WaitLeader on them tells when).
//
// A member's connections to the others pass through their proxies, so those
// proxies cut the connections that member i opened: the proxy maps each
// connection's source address to the process that owns the socket, through
// /proc/net/tcp and /proc/<pid>/fd (Linux only). A connection whose owner it cannot
// find is cut too. Isolate fails t unless the cluster came from EtcdProxiedCluster.
func (c *EtcdCluster) Isolate(t testing.TB, i int) (heal func()) {
	t.Helper()
	if c.boot == nil || !c.boot.proxied {
		t.Fatalf("testenv: Isolate needs a cluster from Env.EtcdProxiedCluster")
	}
	if i < 0 || i >= len(c.Members) {
		t.Fatalf("testenv: Isolate(%d): the cluster has %d members", i, len(c.Members))
	}
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Fatalf("testenv: Isolate reads /proc/net/tcp to tell members' connections apart: %v", err)
	}
	m := c.Members[i]
	c.boot.mu.Lock()
	var heals []func()
	for j := range c.Members {
		p := c.boot.proxies[c.boot.memberName(j)]
		if j == i {
			heals = append(heals, p.CutWhere(func(net.Addr) bool { return true }))
			continue
		}
		proxyAddr, err := netip.ParseAddrPort(p.Addr())
		if err != nil {
			c.boot.mu.Unlock()
			t.Fatalf("testenv: Isolate: proxy address %q: %v", p.Addr(), err)
		}
		heals = append(heals, p.CutWhere(func(client net.Addr) bool {
			owned, err := dialedBy(m.Pid(), client, proxyAddr)
			return owned || err != nil
		}))
	}
	c.boot.mu.Unlock()
	var once sync.Once
	heal = func() {
		once.Do(func() {
			for _, h := range heals {
				h()
			}
		})
	}
	t.Cleanup(heal)
	return heal
}

// dialedBy reports whether the process pid owns the socket of the TCP connection
// from client to server (both on loopback), as /proc/net/tcp{,6} and
// /proc/<pid>/fd tell. It returns an error when it cannot tell: no such
// connection (it was closed), or /proc cannot be read.
func dialedBy(pid int, client net.Addr, server netip.AddrPort) (bool, error) {
	ta, ok := client.(*net.TCPAddr)
	if !ok {
		return false, fmt.Errorf("not a TCP address: %v", client)
	}
	local := ta.AddrPort()
	inode, err := socketInode(local, server)
	if err != nil {
		return false, err
	}
	if pid == 0 {
		return false, nil // the member is not running: the socket is another's
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil // it exited meanwhile
		}
		return false, err
	}
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	for _, e := range entries {
		if link, err := os.Readlink(dir + "/" + e.Name()); err == nil && link == want {
			return true, nil
		}
	}
	return false, nil
}

// socketInode returns the inode of the TCP socket whose local address is local and
// whose remote address is remote, from /proc/net/tcp and /proc/net/tcp6.
func socketInode(local, remote netip.AddrPort) (uint64, error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		inode, err := findSocket(table, local, remote)
		if err != nil || inode != 0 {
			return inode, err
		}
	}
	return 0, fmt.Errorf("no TCP socket from %v to %v", local, remote)
}

// findSocket scans one /proc/net/tcp table for the socket from local to remote; 0
// when it is not there (or has no inode any longer, as in TIME_WAIT).
func findSocket(table string, local, remote netip.AddrPort) (uint64, error) {
	f, err := os.Open(table)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(table, "6") {
			return 0, nil // no IPv6
		}
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		l, err1 := parseProcAddr(fields[1])
		r, err2 := parseProcAddr(fields[2])
		if err1 != nil || err2 != nil || l != local || r != remote {
			continue
		}
		return strconv.ParseUint(fields[9], 10, 64)
	}
	return 0, sc.Err()
}

// parseProcAddr parses an address of /proc/net/tcp{,6}: the IP as hex 32-bit words
// in the kernel's (little-endian) byte order, a colon, and the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port in %q", s)
	}
	// Each 32-bit word was printed as a number: reverse its bytes.
	ip := make([]byte, len(raw))
	for w := 0; w < len(raw); w += 4 {
		binary.LittleEndian.PutUint32(ip[w:], binary.BigEndian.Uint32(raw[w:]))
	}
	addr, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
