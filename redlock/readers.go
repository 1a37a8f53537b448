package redlock

import (
	"slices"
	"sync"

	"github.com/distlock/distlock/internal/redisx"
)

// Of the Waits of one Locker on a key, one reads the release messages: each Wait's
// listener keeps every message in its Inbox, but only the reader takes them and acts
// on them (released), so that a message wakes one goroutine per Locker, not one per
// Wait (a thousand Waits on a key would otherwise all wake for every message, on
// every node, to find it announced already). The first Wait on the key is the
// reader; when the reader's Wait ends, it acts on its Inbox a last time and hands
// the role to the latest Wait that joined, which acts on the messages kept in its
// own Inbox since it subscribed (those the reader acted on already are announced,
// or do not matter; an Inbox that overflowed takes any release for one that
// matters, which costs one attempt).

// readers are the Waits of a Locker, by key, and which of them reads.
type readers struct {
	mu sync.Mutex
	m  map[string]*keyReaders
}

// keyReaders are the Waits on one key: reader, and the others, latest last.
type keyReaders struct {
	reader *reading
	others []*reading
}

// A reading is one Wait's place among the readers of its key.
type reading struct {
	in      *redisx.Inbox
	promote chan struct{} // capacity 1: the Wait is the reader now
	reader  bool          // under readers.mu
}

// join adds a Wait whose listener keeps its messages in in; it is the reader when
// no other Wait is.
func (rs *readers) join(key string, in *redisx.Inbox) *reading {
	r := &reading{in: in, promote: make(chan struct{}, 1)}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = make(map[string]*keyReaders)
	}
	kr := rs.m[key]
	if kr == nil {
		kr = &keyReaders{}
		rs.m[key] = kr
	}
	if kr.reader == nil {
		kr.reader, r.reader = r, true
		r.promote <- struct{}{}
	} else {
		kr.others = append(kr.others, r)
	}
	return r
}

// leave removes r; when r was the reader, the latest other Wait becomes it.
func (rs *readers) leave(key string, r *reading) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	kr := rs.m[key]
	if kr.reader != r {
		if i := slices.Index(kr.others, r); i >= 0 {
			kr.others = slices.Delete(kr.others, i, i+1)
		}
		return
	}
	if len(kr.others) == 0 {
		delete(rs.m, key)
		return
	}
	next := kr.others[len(kr.others)-1]
	kr.others = kr.others[:len(kr.others)-1]
	kr.reader, next.reader = next, true
	next.promote <- struct{}{}
}
