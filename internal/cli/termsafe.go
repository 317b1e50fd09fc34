package cli

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// termUnsafe reports whether a terminal may act on r rather than show it:
// the control characters (C0, DEL, C1), the Unicode bidirectional controls
// and the line and paragraph separators.
func termUnsafe(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f', // ALM, LRM, RLM
		'\u202a' <= r && r <= '\u202e', // LRE, RLE, PDF, LRO, RLO
		'\u2066' <= r && r <= '\u2069', // LRI, RLI, FSI, PDI
		r == '\u2028', r == '\u2029':
		return true
	}
	return false
}

// termSafe returns s with every character a terminal may act on written as
// a Go escape (ESC as \x1b, CR as \r, U+202E as \u202e), and every byte
// that is not UTF-8 as \xNN. Everything else, backslashes included, is
// kept, so ordinary text reads as it was stored.
//
// Stored data (aggregate ids, event types, headers, payloads, errors, audit
// reasons, relay names) may hold any text a writer put there, also with
// plain SQL. Every command prints such text through termSafe (termLines
// for text of several lines, jsonTermSafe for --json), so that it cannot
// act on the terminal: no escape sequence clears the screen or rewrites a
// line, no carriage return hides what came before it, no bidirectional
// override makes a value read backwards.
func termSafe(s string) string {
	if !strings.ContainsFunc(s, termUnsafe) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i]) // a byte that is not UTF-8: range takes one
		case termUnsafe(r):
			b.WriteString(escapeRune(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// termLines is termSafe for text of several lines, such as a payload: it
// keeps the line feeds and escapes everything else termSafe does.
func termLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = termSafe(l)
	}
	return strings.Join(lines, "\n")
}

// escapeRune is r as Go writes it in a quoted string.
func escapeRune(r rune) string {
	switch r {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\v':
		return `\v`
	}
	if r < utf8.RuneSelf {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// jsonTermSafe returns JSON text as encoding/json writes it, with the
// characters a terminal may act on that it leaves as they are (DEL, C1,
// the bidirectional controls) written as \u escapes, which stand for the
// same string. Outside strings JSON text is ASCII without DEL, so only
// string contents change.
func jsonTermSafe(js []byte) []byte {
	if !bytes.ContainsFunc(js, termUnsafe) {
		return js
	}
	out := make([]byte, 0, len(js)+16)
	for len(js) > 0 {
		r, size := utf8.DecodeRune(js)
		if termUnsafe(r) && r != '\n' { // the encoder's own line breaks stay
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, js[:size]...)
		}
		js = js[size:]
	}
	return out
}
