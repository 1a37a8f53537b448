package redisx

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKeyNames(t *testing.T) {
	for _, key := range []string{"", "k", "a{b}c", "orders:42"} {
		sum := sha256.Sum256([]byte(key))
		base := "p:{" + hex.EncodeToString(sum[:8]) + "}:"
		assert.Equal(t, Names{Lock: base + "lock:" + key, Fence: base + "fence:" + key, Channel: base + "release:" + key},
			KeyNames("p", key), "key %q", key)
	}
	allocs := testing.AllocsPerRun(100, func() { _ = KeyNames("distlock", "orders:42") })
	assert.LessOrEqual(t, allocs, 1.0, "allocations per KeyNames")
}
