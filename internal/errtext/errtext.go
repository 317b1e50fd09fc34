// Package errtext makes error texts storable: the last error the stores
// keep per message (pgstore, sqlitestore, the CDC relay) and the error
// kept with a parked message (inbox).
package errtext

import (
	"strings"
	"unicode/utf8"
)

// MaxBytes bounds the error text kept per message.
const MaxBytes = 4000

// Clean makes s storable and bounded: valid UTF-8 (each invalid byte
// sequence becomes U+FFFD), without NUL characters (which PostgreSQL's
// text columns refuse), at most MaxBytes bytes, cut at a character
// boundary.
func Clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return Truncate(strings.ReplaceAll(s, "\x00", ""), MaxBytes)
}

// Truncate cuts s to at most n bytes without splitting a character.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
