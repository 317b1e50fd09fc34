// Package sqlname holds the rules for the names that the packages put into
// SQL identifiers (PostgreSQL schemas, SQLite table prefixes), and the
// shortening of a derived PostgreSQL identifier to the length PostgreSQL
// allows, so that pgstore, the inbox and the CDC relay apply them alike.
package sqlname

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/outbox-dev/outbox/internal/conf"
)

// MaxIdent is PostgreSQL's identifier length limit in bytes.
const MaxIdent = 63

// schemaRe is the rule for a PostgreSQL schema name: lower-case, so that
// the quoted and unquoted spellings name the same schema, and at most
// MaxIdent bytes.
var schemaRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// prefixRe is the rule for a SQLite table prefix: lower-case letters,
// digits and underscores only, so that it can stand inside a quoted
// identifier.
var prefixRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// Schema checks a PostgreSQL schema name: it must match
// ^[a-z_][a-z0-9_]{0,62}$ and not start with "pg_", which PostgreSQL
// reserves. The error names field, for conf.First.
func Schema(field, v string) error {
	switch {
	case !schemaRe.MatchString(v):
		return conf.Bad(field, "%q must match %s", v, schemaRe)
	case strings.HasPrefix(v, "pg_"):
		return conf.Bad(field, "%q must not start with pg_ (reserved by PostgreSQL)", v)
	}
	return nil
}

// Prefix checks a SQLite table prefix: it must match
// ^[a-z_][a-z0-9_]{0,39}$, or be empty where emptyOK, and not start with
// "sqlite_", which SQLite reserves. The error names field, for conf.First.
func Prefix(field, v string, emptyOK bool) error {
	switch {
	case v == "" && emptyOK:
		return nil
	case !prefixRe.MatchString(v) && emptyOK:
		return conf.Bad(field, "%q must be empty or match %s", v, prefixRe)
	case !prefixRe.MatchString(v):
		return conf.Bad(field, "%q must match %s", v, prefixRe)
	case strings.HasPrefix(v, "sqlite_"):
		return conf.Bad(field, "%q must not start with sqlite_ (reserved by SQLite)", v)
	}
	return nil
}

// Fit returns name if it is at most MaxIdent bytes long, and otherwise
// its first 46 bytes and a hash of the whole, so that names that differ
// stay distinct.
func Fit(name string) string {
	if len(name) <= MaxIdent {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("%s_%016x", name[:MaxIdent-17], h.Sum64())
}
