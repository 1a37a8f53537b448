// Package keytext writes keys into messages: quoted, and cut so that a long key
// never floods a log line. The root package's OpError and package driver's
// QuoteKey share it.
package keytext

import (
	"strconv"
	"unicode/utf8"
)

// Max is how many bytes of a key a message shows.
const Max = 64

// Quote returns key Go-quoted (so any byte is visible and safe), cut to Max bytes at
// a character boundary, and followed by its length when it was cut.
func Quote(key string) string {
	head, cut := Cut(key)
	if !cut {
		return strconv.Quote(key)
	}
	return strconv.Quote(head) + "...(" + strconv.Itoa(len(key)) + " bytes)"
}

// Log returns key for a log attribute: unquoted (the handler quotes), and cut like
// Quote's.
func Log(key string) string {
	head, cut := Cut(key)
	if !cut {
		return key
	}
	return head + "...(" + strconv.Itoa(len(key)) + " bytes)"
}

// Cut returns key's first Max bytes, cut at a character boundary, and whether that
// dropped anything.
func Cut(key string) (string, bool) {
	if len(key) <= Max {
		return key, false
	}
	cut := Max
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return key[:cut], true
}
