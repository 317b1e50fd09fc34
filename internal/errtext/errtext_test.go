package errtext_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/outbox-dev/outbox/internal/errtext"
)

// Clean keeps what is storable as it is, and makes the rest valid UTF-8
// without NUL, at most MaxBytes long, never splitting a character.
func TestClean(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", errtext.MaxBytes)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "broker said no", "broker said no"},
		{"multi-byte", "stock für Ärger: 日本", "stock für Ärger: 日本"},
		{"NUL removed", "a\x00b\x00", "ab"},
		{"invalid UTF-8 replaced", "a\xffb\xc3", "a\uFFFDb\uFFFD"},
		{"exactly MaxBytes", long, long},
		{"cut at MaxBytes", long + "yz", long},
		{"cut before a split character", long[:errtext.MaxBytes-1] + "é", long[:errtext.MaxBytes-1]},
		{"cut before a split 3-byte character", long[:errtext.MaxBytes-2] + "日", long[:errtext.MaxBytes-2]},
		{"character ending at MaxBytes kept", long[:errtext.MaxBytes-2] + "é!", long[:errtext.MaxBytes-2] + "é"},
		{"NUL removed before the cut", "\x00\x00" + long, long},
		{"replacement counted in the cut", "\xff" + long, "\uFFFD" + long[:errtext.MaxBytes-3]},
	} {
		got := errtext.Clean(tc.in)
		if got != tc.want {
			t.Errorf("%s: Clean(%.20q...) = %.20q... (%d bytes), want %.20q... (%d bytes)",
				tc.name, tc.in, got, len(got), tc.want, len(tc.want))
		}
		if !utf8.ValidString(got) || strings.ContainsRune(got, 0) || len(got) > errtext.MaxBytes {
			t.Errorf("%s: Clean gave %d bytes, valid UTF-8 %v, NUL %v", tc.name, len(got), utf8.ValidString(got), strings.ContainsRune(got, 0))
		}
	}
}

// Truncate cuts at most n bytes without splitting a character, and leaves
// a shorter string alone.
func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"}, {"abc", 3, "abc"}, {"abc", 2, "ab"}, {"abc", 0, ""},
		{"aé", 2, "a"}, {"aé", 3, "aé"}, {"日本", 5, "日"}, {"日本", 2, ""},
	} {
		if got := errtext.Truncate(tc.in, tc.n); got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
