package faultproxy

import "net"

// cutSet holds the matches of the CutWhere calls in force; Proxy.mu guards it.
type cutSet struct {
	next    int
	matches map[int]func(client net.Addr) bool
}

// CutWhere cuts the connections of some clients only: it resets (on both sides)
// every open connection for which match(client) reports true, where client is the
// address the connection came from, and resets at once every new connection for
// which it does, until the returned heal is called. Other connections forward as
// the proxy's mode says. Several CutWhere may be in force at once; a connection is
// cut while any of them matches. heal may be called more than once; Heal does not
// end a CutWhere.
//
// match is called on the proxy's goroutines, possibly concurrently, once per
// connection and CutWhere: it must be safe for concurrent use and should be quick.
// It is how a test cuts one process off from the others when they all reach a
// server through one proxy (internal/testenv maps client to the process that owns
// its socket). When CutWhere returns, every open connection that matched has been
// closed.
func (p *Proxy) CutWhere(match func(client net.Addr) bool) (heal func()) {
	p.mu.Lock()
	if p.cuts.matches == nil {
		p.cuts.matches = make(map[int]func(net.Addr) bool)
	}
	id := p.cuts.next
	p.cuts.next++
	p.cuts.matches[id] = match
	// A connection accepted from now on is checked by its run (cutByMatch): it
	// starts after the connection is in p.conns, so one that is not in this
	// snapshot sees the match.
	conns := p.snapshotLocked()
	p.mu.Unlock()
	for _, c := range conns {
		if match(c.client.RemoteAddr()) {
			c.shutdown(true)
		}
	}
	return func() {
		p.mu.Lock()
		delete(p.cuts.matches, id)
		p.mu.Unlock()
	}
}

// cutByMatch reports whether a CutWhere in force matches the connection from
// client.
func (p *Proxy) cutByMatch(client net.Conn) bool {
	p.mu.Lock()
	matches := make([]func(net.Addr) bool, 0, len(p.cuts.matches))
	for _, m := range p.cuts.matches {
		matches = append(matches, m)
	}
	p.mu.Unlock()
	for _, m := range matches {
		if m(client.RemoteAddr()) {
			return true
		}
	}
	return false
}
