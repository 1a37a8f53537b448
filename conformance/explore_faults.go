package conformance

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// A faultPlan injects the harness's faults on a timeline of its own, one at a
// time, and records each as an OpFault event (Client -1 for the servers).
type faultPlan struct {
	x       *explorer
	kinds   []string // what the harness offers
	missing []string // what it lacks: NOT RUN
	// servers is held for writing while a fault of the servers is in place, and
	// for reading while the explorer makes a client.
	servers sync.RWMutex
}

// OpFault is a fault of an exploration: from Invoke until Return, on Client (-1
// for the servers); Err names it.
const OpFault = "Fault"

func newFaultPlan(x *explorer) *faultPlan {
	p := &faultPlan{x: x}
	c, f := x.client(0).c, x.s.h.Faults
	offered := map[string]bool{
		"Partition": c.Partition != nil, "Delay": c.Delay != nil, "Crash": c.Crash != nil,
		"IsolateServer": c.IsolateServer != nil, "PauseServer": f.PauseServer != nil,
		"RestartServer": f.RestartServer != nil && !x.s.h.Caps.RestartLosesLocks,
		"ChangeLeader":  f.ChangeLeader != nil, "LoseMinority": f.LoseMinority != nil,
	}
	for _, name := range faultNames {
		switch {
		case !offered[name]:
			p.missing = append(p.missing, name)
		case name == "Partition" || name == "Delay":
			p.kinds = append(p.kinds, name, name) // the common faults come twice as often
		default:
			p.kinds = append(p.kinds, name)
		}
	}
	return p
}

func (p *faultPlan) names() []string { return slices.Compact(slices.Clone(p.kinds)) }

// run injects faults until stop; each lasts from one to four times the short ttl.
func (p *faultPlan) run(rnd *rand.Rand, stop <-chan struct{}) {
	if len(p.kinds) == 0 {
		return
	}
	ttl := p.x.s.ttl
	for {
		t := time.NewTimer(ttl + time.Duration(rnd.Int64N(int64(3*ttl))))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		p.inject(p.kinds[rnd.IntN(len(p.kinds))], rnd.IntN(p.x.o.Clients), ttl+time.Duration(rnd.Int64N(int64(3*ttl))), rnd)
	}
}

// inject applies one fault for about d and heals it.
func (p *faultPlan) inject(kind string, i int, d time.Duration, rnd *rand.Rand) {
	x := p.x
	c := x.client(i)
	who, start := c.rec.client, time.Now()
	var heal func()
	switch kind {
	case "Partition":
		heal = c.c.Partition()
	case "Delay":
		heal = c.c.Delay(time.Millisecond + time.Duration(rnd.Int64N(int64(30*time.Millisecond))))
	case "IsolateServer":
		who = -1 // a member of the cluster is cut off: the servers' fault
		heal = c.c.IsolateServer()
	case "Crash":
		p.crash(i, c)
	default:
		who = -1
		p.servers.Lock()
		defer p.servers.Unlock()
		heal = p.server(kind)
	}
	if heal != nil {
		sleepCtx(x.t.Context(), d)
		heal()
	}
	x.hist.add(Event{Client: who, Op: OpFault, Invoke: x.hist.at(start), Return: x.hist.at(time.Now()), Err: kind})
}

// crash crashes client i and replaces it.
func (p *faultPlan) crash(i int, c *xclient) {
	if !c.markGone() {
		return
	}
	inv := time.Now()
	c.c.Crash()
	if p.x.s.h.Caps.SessionExpiry {
		c.rec.closed(OpCrash, inv, time.Now(), nil)
	}
	p.x.replace(i, c)
}

// server applies a server-side fault; the ones that end by themselves return a
// nil heal.
func (p *faultPlan) server(kind string) (heal func()) {
	f, t := p.x.s.h.Faults, p.x.t
	switch kind {
	case "PauseServer":
		resume := f.PauseServer(t)
		var once sync.Once
		return func() { once.Do(resume) }
	case "RestartServer":
		f.RestartServer(t)
	case "ChangeLeader":
		f.ChangeLeader(t)
	case "LoseMinority":
		f.LoseMinority(t)
	}
	return nil
}
