package cli

import (
	"net/url"
	"regexp"
	"strings"
)

// redactedPassword replaces a password that RedactURL removes.
const redactedPassword = "xxxxx"

// keywordPassword matches a password setting in a key=value connection
// string (password=secret, password = 'two words', sslpassword=...): the key
// and '=' in group 1, the value, quoted with backslash escapes or bare, after.
var keywordPassword = regexp.MustCompile(`(?i)(\b[a-z_]*password\s*=\s*)('(?:\\.|[^'\\])*'?|[^\s]*)`)

// RedactURL returns a database URL or key=value DSN fit for logs and error
// messages: every password in it (the user-info password of a URL, and any
// password or sslpassword setting, in the query or as a keyword) is replaced
// by "xxxxx". The rest of the string is kept so that the host, port, user and
// database stay visible. When a URL is malformed, RedactURL masks more rather
// than less.
func RedactURL(s string) string {
	scheme, rest, isURL := strings.Cut(s, "://")
	if !isURL {
		return keywordPassword.ReplaceAllString(s, "${1}"+redactedPassword)
	}
	// An unescaped '/', '?' or '#' in a password makes url.Parse succeed
	// with no user info and the password in the path, query or fragment;
	// an '@' after the authority says so.
	if u, err := url.Parse(s); err == nil && (u.User != nil || !strings.Contains(rest, "@")) {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redactedPassword)
		}
		q := u.Query()
		changed := false
		for key := range q {
			if strings.Contains(strings.ToLower(key), "password") {
				q.Set(key, redactedPassword)
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	// Malformed: the user info is everything up to the last '@', and the
	// password what follows the first ':' in it.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, _, hasPW := strings.Cut(rest[:at], ":"); hasPW {
			rest = user + ":" + redactedPassword + rest[at:]
		}
	}
	return scheme + "://" + keywordPassword.ReplaceAllString(rest, "${1}"+redactedPassword)
}
