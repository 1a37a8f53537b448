package zklock

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/distlock/distlock"
)

// Names of the lock nodes. A lock node is a child of its key's node, named
//
//	_c_<id>-lock-<sequence>
//
// where _c_<id>- is the "protected" prefix of the ZooKeeper recipes (Curator and
// go-zookeeper use it too): id identifies the acquisition, so that a client whose
// create request lost its reply can find its node again; <sequence> is the 10-digit
// sequence number that ZooKeeper appends to an ephemeral-sequential node.
const (
	protectedPrefix = "_c_"
	lockInfix       = "-lock-"
	seqDigits       = 10
	idLen           = 26 // driver.NewToken: 128 bits as base32
)

// Names of the waiter nodes that Wait queues up with (see Wait): children of the key's
// node named _w_<id>-wait-lock-<sequence>. They are not contenders: they order waiters
// and never block TryLock. They end in lock-<sequence> so that go-zookeeper's zk.Lock
// and Curator, which parse every child's sequence number that way (zk.Lock fails on a
// child it cannot parse), still work on the same key: they take a waiter node for one
// more lock node ahead of them, which is gone within a second of the holder's release.
const (
	waiterPrefix = "_w_"
	waitInfix    = "-wait-lock-"
)

// waitNodePrefix is the path that an ephemeral-sequential create of waiter id under
// keyPath extends with its sequence number.
func waitNodePrefix(keyPath, id string) string {
	return keyPath + "/" + waiterPrefix + id + waitInfix
}

// parseWaiter parses a child name as a waiter node; ok is false for anything else.
func parseWaiter(name string) (c contender, ok bool) {
	rest, found := strings.CutPrefix(name, waiterPrefix)
	if !found {
		return c, false
	}
	i := strings.LastIndex(rest, waitInfix)
	if i <= 0 {
		return c, false
	}
	seq := rest[i+len(waitInfix):]
	if len(seq) != seqDigits || !allDigits(seq) {
		return c, false
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil {
		return c, false
	}
	return contender{name: name, id: rest[:i], seq: n}, true
}

// keyName returns the name of key's node: the unpadded base64url encoding of the
// key's bytes. Every key, whatever its bytes ('/', "..", NUL, invalid UTF-8), maps to
// exactly one name of the characters A-Z a-z 0-9 - _, and distinct keys to distinct
// names, so a key can neither escape Prefix nor alias another key.
func keyName(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

// lockNodePrefix is the path that an ephemeral-sequential create of acquisition id
// under keyPath extends with its sequence number.
func lockNodePrefix(keyPath, id string) string {
	return keyPath + "/" + protectedPrefix + id + lockInfix
}

// A contender is a child of a key's node that takes part in the lock: a protected
// lock node of this package, of Curator's InterProcessMutex or of go-zookeeper's
// zk.Lock. Every other child is foreign and ignored.
type contender struct {
	name string
	id   string // the protected id; ours are idLen base32 characters
	seq  int64
}

// parseContender parses a child name; ok is false for a foreign child.
func parseContender(name string) (c contender, ok bool) {
	rest, found := strings.CutPrefix(name, protectedPrefix)
	if !found {
		return c, false
	}
	i := strings.LastIndex(rest, lockInfix)
	if i <= 0 {
		return c, false
	}
	seq := rest[i+len(lockInfix):]
	if len(seq) != seqDigits || !allDigits(seq) {
		return c, false
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil {
		return c, false
	}
	return contender{name: name, id: rest[:i], seq: n}, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// A handle is what a Lease's Token carries: the acquisition's id (128 random bits)
// and the sequence number of its node, which together name the lock node. The Token
// carries nothing else: a Token that was altered names no node. The session that owns
// the node is read from the node itself (its ephemeralOwner), never trusted from the
// Token.
type handle struct {
	id  string
	seq int64
}

// token formats h as a Lease Token: <id>-<sequence>.
func (h handle) token() string {
	return fmt.Sprintf("%s-%0*d", h.id, seqDigits, h.seq)
}

// nodePath returns the path of h's lock node under keyPath.
func (h handle) nodePath(keyPath string) string {
	return fmt.Sprintf("%s%0*d", lockNodePrefix(keyPath, h.id), seqDigits, h.seq)
}

// parseToken parses a Token made by handle.token; ok is false for anything else.
func parseToken(tok string) (h handle, ok bool) {
	id, seq, found := strings.Cut(tok, "-")
	if !found || !validID(id) || len(seq) != seqDigits || !allDigits(seq) {
		return h, false
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil {
		return h, false
	}
	return handle{id: id, seq: n}, true
}

// validID reports whether id looks like driver.NewToken's output.
func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// validatePrefix checks Options.Prefix: an absolute ZooKeeper path of one or more
// components of the characters A-Z a-z 0-9 and -_.:@+=, (no "." or ".." component, no
// trailing '/'), outside ZooKeeper's reserved /zookeeper.
func validatePrefix(prefix string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: Options.Prefix %q %s", distlock.ErrInvalid, prefix, why)
	}
	if !strings.HasPrefix(prefix, "/") || prefix == "/" {
		return bad("must be an absolute path below / (such as /distlock)")
	}
	comps := strings.Split(prefix[1:], "/")
	for _, c := range comps {
		if c == "" {
			return bad("has an empty component (a doubled or trailing '/')")
		}
		if c == "." || c == ".." {
			return bad("has a '.' or '..' component")
		}
		for i := 0; i < len(c); i++ {
			ch := c[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("-_.:@+=,", ch) >= 0) {
				return bad(fmt.Sprintf("has the character %q; use A-Z a-z 0-9 and -_.:@+=,", ch))
			}
		}
	}
	if comps[0] == "zookeeper" {
		return bad("is inside ZooKeeper's reserved /zookeeper")
	}
	return nil
}
