package zklock

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
)

func TestKeyNameIsSafeAndInjective(t *testing.T) {
	keys := []string{
		"a", "A", "a/b", "a/", "/a", "a//b", "a%2Fb", "a%2fb", "..", ".", "../a", "/",
		"a\x00b", "\x00", "zookeeper", "ключ", "🔒", "\xff\xfe", "e\u0301", "\u00e9",
		strings.Repeat("\xff", MaxKeyLen),
	}
	seen := make(map[string]string)
	for _, k := range keys {
		n := keyName(k)
		if prev, dup := seen[n]; dup {
			t.Fatalf("keys %q and %q map to one node name %q", prev, k, n)
		}
		seen[n] = k
		if n == "" || n == "." || n == ".." {
			t.Fatalf("key %q maps to the unsafe name %q", k, n)
		}
		for _, c := range n {
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				t.Fatalf("key %q maps to %q, which has the character %q", k, n, c)
			}
		}
	}
}

func TestTokenRoundTrip(t *testing.T) {
	h := handle{id: driver.NewToken(), seq: 42}
	tok := h.token()
	got, ok := parseToken(tok)
	if !ok || got != h {
		t.Fatalf("parseToken(%q) = %+v, %v; want %+v", tok, got, ok, h)
	}
	if p := h.nodePath("/distlock/YQ"); p != "/distlock/YQ/_c_"+h.id+"-lock-0000000042" {
		t.Fatalf("nodePath = %q", p)
	}
	for _, bad := range []string{
		"", driver.NewToken(), tok + "x", tok[:len(tok)-1], strings.ToLower(tok), tok + "-0000000000000001",
		"AAAAAAAAAAAAAAAAAAAAAAAAA1-0000000042",
		"AAAAAAAAAAAAAAAAAAAAAAAAAA-000000004x",
		"AAAAAAAAAAAAAAAAAAAAAAAAA-00000000042",
	} {
		if _, ok := parseToken(bad); ok {
			t.Errorf("parseToken(%q) accepted a Token this package never makes", bad)
		}
	}
}

func TestParseContender(t *testing.T) {
	for name, want := range map[string]contender{
		"_c_AAAAAAAAAAAAAAAAAAAAAAAAAA-lock-0000000007":           {id: "AAAAAAAAAAAAAAAAAAAAAAAAAA", seq: 7},
		"_c_0123456789abcdef0123456789abcdef-lock-0000000012":     {id: "0123456789abcdef0123456789abcdef", seq: 12}, // go-zookeeper zk.Lock
		"_c_3f2504e0-4f89-11d3-9a0c-0305e82c3301-lock-0000000003": {id: "3f2504e0-4f89-11d3-9a0c-0305e82c3301", seq: 3},
	} {
		c, ok := parseContender(name)
		if !ok || c.id != want.id || c.seq != want.seq || c.name != name {
			t.Errorf("parseContender(%q) = %+v, %v; want id %q seq %d", name, c, ok, want.id, want.seq)
		}
	}
	for _, foreign := range []string{
		"readme", "lock-0000000001", "_c_-lock-0000000001", "_c_x-lock-1", "_c_x-lock-00000000011",
		"_c_x-lock-000000000a", "x_c_AAAA-lock-0000000001", "_c_x-read-0000000001",
		"_w_AAAAAAAAAAAAAAAAAAAAAAAAAA-wait-lock-0000000001", // a waiter node
	} {
		if c, ok := parseContender(foreign); ok {
			t.Errorf("parseContender(%q) = %+v: a foreign child taken for a lock node", foreign, c)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, good := range []string{"/distlock", "/a/b-c/d_e.f", "/x:y@z+1=2,3", "/zookeeper2"} {
		if err := validatePrefix(good); err != nil {
			t.Errorf("validatePrefix(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"", "/", "distlock", "/a/", "//a", "/a//b", "/a/./b", "/a/..", "/zookeeper", "/zookeeper/x", "/a b", "/a\x00", "/ключ"} {
		err := validatePrefix(bad)
		if !errors.Is(err, distlock.ErrInvalid) || !strings.Contains(err.Error(), "Options.Prefix") {
			t.Errorf("validatePrefix(%q) = %v; want ErrInvalid naming Options.Prefix", bad, err)
		}
	}
}

func TestParseWaiter(t *testing.T) {
	name := "_w_AAAAAAAAAAAAAAAAAAAAAAAAAA-wait-lock-0000000031"
	if w, ok := parseWaiter(name); !ok || w.id != "AAAAAAAAAAAAAAAAAAAAAAAAAA" || w.seq != 31 {
		t.Fatalf("parseWaiter(%q) = %+v, %v", name, w, ok)
	}
	if p := waitNodePrefix("/r/k", "ID"); p != "/r/k/_w_ID-wait-lock-" {
		t.Fatalf("waitNodePrefix = %q", p)
	}
	for _, other := range []string{"_c_AAAAAAAAAAAAAAAAAAAAAAAAAA-lock-0000000001", "_w_x-wait-lock-1", "_w_-wait-lock-0000000001", "readme"} {
		if w, ok := parseWaiter(other); ok {
			t.Errorf("parseWaiter(%q) = %+v", other, w)
		}
	}
}
