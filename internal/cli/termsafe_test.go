package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile is stored text that would act on a terminal printed as it is:
// clear the screen (ESC [2J), return to the line start (CR), ring the bell
// (BEL), read backwards (U+202E), a C1 CSI (U+009B), DEL, an isolate
// (U+2066), a line separator, and a byte that is not UTF-8.
const hostile = "a\x1b[2Jb\rc\ad\u202ee\u009bf\x7fg\u2066h\u2028i\xffj"

func TestTermSafe_EscapesWhatATerminalActsOn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"ESC [2J", "\x1b[2J", `\x1b[2J`},
		{"CR", "paid\rrefunded", `paid\rrefunded`},
		{"BEL", "\a", `\a`},
		{"bidi override", "abc\u202edef", `abc\u202edef`},
		{"bidi isolates and marks", "\u2066\u2067\u2068\u2069\u200e\u200f\u061c", `\u2066\u2067\u2068\u2069\u200e\u200f\u061c`},
		{"C1 CSI", "\u009b31m", `\u009b31m`},
		{"DEL", "\x7f", `\x7f`},
		{"NUL", "\x00", `\x00`},
		{"tab and line feed", "a\tb\nc", `a\tb\nc`},
		{"line and paragraph separators", "\u2028\u2029", `\u2028\u2029`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"everything", hostile, `a\x1b[2Jb\rc\ad\u202ee\u009bf\x7fg\u2066h\u2028i\xffj`},
		// Printable text stays as it was stored.
		{"plain", "Order/42", "Order/42"},
		{"unicode", "Kunde Müller / 東京 🚚 👩‍👩‍👧", "Kunde Müller / 東京 🚚 👩‍👩‍👧"},
		{"replacement character", "a\uFFFDb", "a\uFFFDb"},
		{"backslashes", `C:\x1b \n`, `C:\x1b \n`},
	} {
		if got := termSafe(c.in); got != c.want {
			t.Errorf("%s: termSafe(%q) = %q; want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestTermLines_KeepsLineFeedsOnly(t *testing.T) {
	t.Parallel()
	if got, want := termLines("one\r\ntwo\x1b[2J\nthree"), "one\\r\ntwo\\x1b[2J\nthree"; got != want {
		t.Errorf("termLines = %q; want %q", got, want)
	}
}

// writeJSON escapes what encoding/json leaves raw (DEL, C1, bidi
// controls), and the text still decodes to the stored value.
func TestWriteJSON_IsTerminalSafeAndDecodesToTheSameValue(t *testing.T) {
	t.Parallel()
	in := map[string]string{"aggregateId": strings.ToValidUTF8(hostile, "\uFFFD"), "k\u202e": "ü\u0085"}
	var b strings.Builder
	if err := writeJSON(&b, in); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	assertTerminalSafe(t, "writeJSON", out)
	var back map[string]string
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatalf("writeJSON wrote invalid JSON: %v\n%s", err, out)
	}
	for k, v := range in {
		if back[k] != v {
			t.Errorf("%q decodes to %q; want %q", k, back[k], v)
		}
	}
}

// assertTerminalSafe fails when out holds anything a terminal acts on
// other than line feeds and the tabs of tables, or bytes that are not
// UTF-8. It lists the characters itself, independently of termUnsafe.
func assertTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s printed bytes that are not UTF-8:\n%q", what, out)
	}
	for _, r := range out {
		switch {
		case r == '\n':
		case r < 0x20, 0x7f <= r && r <= 0x9f, // C0, DEL, C1
			r == 0x61c, r == 0x200e, r == 0x200f, 0x202a <= r && r <= 0x202e, 0x2066 <= r && r <= 0x2069, // bidi
			r == 0x2028, r == 0x2029:
			t.Errorf("%s printed %U raw:\n%q", what, r, out)
			return
		}
	}
}
