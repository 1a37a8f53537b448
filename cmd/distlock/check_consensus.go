package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// checkEtcd reads the cluster's members and each endpoint's version and status.
// etcd's own durability setting (--unsafe-no-fsync) is not visible through its
// API; the report says so.
func checkEtcd(ctx context.Context, u *backendURL) (*checkReport, error) {
	client, err := etcdClient(ctx, u)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	red := newRedactor(u)
	members, err := client.MemberList(ctx)
	if err != nil {
		return nil, red.wrap(fmt.Errorf("etcd member list: %w", err))
	}
	r := &checkReport{}
	voters, learners := 0, 0
	for _, m := range members.Members {
		if m.IsLearner {
			learners++
		} else {
			voters++
		}
	}
	for _, ep := range client.Endpoints() {
		st, err := client.Status(ctx, ep)
		if err != nil {
			r.server("%s: not reached (%s)", ep, oneLine(err))
			continue
		}
		role := "follower"
		switch {
		case st.IsLearner:
			role = "learner"
		case st.Header != nil && st.Leader == st.Header.MemberId:
			role = "leader"
		case st.Leader == 0:
			role = "no leader"
		}
		r.server("%s: etcd %s, %s, raft term %d", ep, st.Version, role, st.RaftTerm)
		for _, e := range st.Errors {
			r.add(sevNote, ep+" error", "", "%s", e)
		}
	}
	alarms, err := client.AlarmList(ctx)
	switch {
	case err != nil:
		r.add(sevUnchecked, "alarms", "", "could not be read: %s", oneLine(err))
	case len(alarms.Alarms) == 0:
		r.ok("alarms", "none")
	default:
		for _, a := range alarms.Alarms {
			sev := sevNote // NOSPACE: writes are refused, no lock can be taken or renewed
			if a.Alarm.String() == "CORRUPT" {
				sev = sevUnsafe
			}
			r.add(sev, "alarm", a.Alarm.String(), "on member %x; see etcdctl alarm list", a.MemberID)
		}
	}
	consensusMembers(r, "members", voters)
	if learners > 0 {
		r.add(sevNote, "learners", itoa(learners), "learners do not vote: they add no fault tolerance")
	}
	r.add(sevNote, "fsync", "", "not visible through etcd's API: make sure no member runs with --unsafe-no-fsync, which loses acknowledged writes (locks, and revisions that fences come from) when a machine crashes")
	return r, nil
}

// consensusMembers reports the number of voting members of an etcd cluster or a
// ZooKeeper ensemble.
func consensusMembers(r *checkReport, setting string, n int) {
	switch {
	case n == 1:
		r.add(sevNote, setting, "1", "a single server: locks stop working while it is down (exclusion holds); run 3 or 5 for fault tolerance")
	case n%2 == 0:
		r.add(sevNote, setting, itoa(n), "an even number of voters tolerates no more failures than %d; run an odd number", n-1)
	default:
		r.ok(setting, fmt.Sprintf("%d (tolerates %d down)", n, (n-1)/2))
	}
}

// checkZooKeeper reads the ensemble's configuration through a session, each
// server's version and mode with the four-letter word srvr (whitelisted by
// default since ZooKeeper 3.5), and whether it syncs its log with mntr where
// mntr is allowed.
func checkZooKeeper(ctx context.Context, u *backendURL) (*checkReport, error) {
	t, err := zkTargetOf(u)
	if err != nil {
		return nil, err
	}
	sess, err := t.connect(ctx, statusSessionTimeout)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	servers, tlsCfg := t.servers, t.tls
	r := &checkReport{}
	modes := map[string]int{}
	for _, s := range servers {
		out, err := zkFourLetter(ctx, s, "srvr", tlsCfg)
		if err != nil {
			r.server("%s: srvr failed (%s)", s, oneLine(err))
			continue
		}
		f := zkFields(out)
		if f["Mode"] == "" {
			r.server("%s: srvr answered %q (not whitelisted?)", s, strings.TrimSpace(out))
			continue
		}
		modes[f["Mode"]]++
		version, _, _ := strings.Cut(f["Zookeeper version"], "-") // 3.8.0-<commit>, built on ...
		r.server("%s: ZooKeeper %s, %s", s, version, f["Mode"])
		zkForceSync(ctx, r, s, tlsCfg)
	}
	cfg, _, err := sess.Conn().Get("/zookeeper/config")
	voters := 0
	if err == nil {
		for line := range strings.SplitSeq(string(cfg), "\n") {
			if strings.HasPrefix(line, "server.") && !strings.Contains(line, ":observer") {
				voters++
			}
		}
	}
	switch {
	case voters > 0:
		consensusMembers(r, "voters", voters)
	case modes["standalone"] > 0:
		consensusMembers(r, "voters", 1)
	default:
		r.add(sevUnchecked, "voters", "", "the ensemble's membership could not be read (/zookeeper/config is empty and srvr did not answer)")
	}
	return r, nil
}

// zkForceSync infers the server's forceSync from its metrics (mntr): with
// forceSync=yes every transaction it logs is fsynced and timed, and check's own
// session was one such transaction, so a count of zero fsyncs means forceSync=no.
// The setting itself is not visible remotely (conf does not show it).
func zkForceSync(ctx context.Context, r *checkReport, addr string, tlsCfg *tls.Config) {
	out, err := zkFourLetter(ctx, addr, "mntr", tlsCfg)
	if err != nil {
		r.add(sevNote, addr+" forceSync", "", "not visible: mntr failed (%s); make sure forceSync is not set to no", oneLine(err))
		return
	}
	n, ok := zkMetrics(out)["zk_cnt_fsynctime"]
	switch {
	case !ok:
		r.add(sevNote, addr+" forceSync", "", "not visible (mntr is not allowed: 4lw.commands.whitelist); make sure forceSync is not set to no")
	case n == "0":
		r.add(sevUnsafe, addr+" forceSync", "no", "(inferred: the server logged this check's session without an fsync) it acknowledges writes before they reach the disk: a crash of the machine loses locks just taken and can repeat zxids, which fences come from; remove forceSync=no")
	default:
		r.ok(addr+" forceSync", "yes (inferred: "+n+" fsync(s) since the server started)")
	}
}

// zkMetrics parses the "name<TAB>value" lines of mntr's answer.
func zkMetrics(s string) map[string]string {
	m := make(map[string]string)
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// zkFourLetter sends a four-letter word to the ZooKeeper server at addr (over TLS
// when tlsCfg is not nil) and returns its answer.
func zkFourLetter(ctx context.Context, addr, cmd string, tlsCfg *tls.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var c net.Conn
	var err error
	if tlsCfg != nil {
		c, err = (&tls.Dialer{Config: tlsCfg}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil && len(b) == 0 {
		return "", err
	}
	return string(b), nil
}

// zkFields parses the "Name: value" or "name=value" lines of a four-letter word's
// answer.
func zkFields(s string) map[string]string {
	m := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		} else if k, v, ok := strings.Cut(line, "="); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}
