package redisx

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Names are the Redis names of one user key. They share the hash tag {<tag>}, so the
// lock and fence keys hash to one Cluster slot, and the channel to that slot too.
type Names struct {
	Lock, Fence, Channel string
}

// KeyNames returns the Redis names of key under prefix:
// "<prefix>:{<tag>}:lock:<key>", "<prefix>:{<tag>}:fence:<key>" and
// "<prefix>:{<tag>}:release:<key>", where <tag> is the first 8 bytes of SHA-256(key)
// in hex. Redis hashes only the text between the first '{' and the next '}'; the
// prefix holds no brace (Common.Fill) and the tag is hex, so that is always the tag,
// whatever braces key contains. The key follows in full after a fixed-length part, so
// distinct keys (and distinct prefixes) give distinct names: no collisions, however
// unlikely, and the keys stay readable in redis-cli.
func KeyNames(prefix, key string) Names {
	sum := sha256.Sum256([]byte(key))
	var tag [16]byte
	hex.Encode(tag[:], sum[:8])
	// The three names share one allocation: the three of them, one after the other,
	// in one string that they slice.
	const lock, fence, release = "lock:", "fence:", "release:"
	base := len(prefix) + 2 + len(tag) + 2
	var b strings.Builder
	b.Grow(3*(base+len(key)) + len(lock) + len(fence) + len(release))
	for _, kind := range [3]string{lock, fence, release} {
		b.WriteString(prefix)
		b.WriteString(":{")
		b.Write(tag[:])
		b.WriteString("}:")
		b.WriteString(kind)
		b.WriteString(key)
	}
	s := b.String()
	i := base + len(lock) + len(key)
	j := i + base + len(fence) + len(key)
	return Names{Lock: s[:i], Fence: s[i:j], Channel: s[j:]}
}

// NoTTLBound bounds a wait for a lock key that has no time to live, which neither
// backend makes (someone PERSISTed it, or wrote the key by hand).
const NoTTLBound = time.Second

// Bound turns a PTTL reply into the end of a wait for the lock to expire: free is
// true when the key does not exist. go-redis reports PTTL's -2 (no key) and -1 (no
// expiry) as these durations. PTTL truncates to the millisecond, and the reply came
// after the server read it: counting from now plus one millisecond, the bound falls
// after the server's expiry, not just before it. A key without expiry is bounded
// by NoTTLBound.
func Bound(pttl time.Duration) (until time.Time, free bool) {
	switch {
	case pttl == -2:
		return time.Time{}, true
	case pttl < 0:
		return time.Now().Add(NoTTLBound), false
	default:
		return time.Now().Add(pttl + time.Millisecond), false
	}
}
