package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// MustReadBookkeeping reads a dialect's bookkeeping statements, embedded
// in dir of fsys as setup.sql, applied.sql and record.sql, whose
// placeholders [Bookkeeping.Replace] fills in. A missing file is a
// programming mistake: it panics.
func MustReadBookkeeping(fsys fs.FS, dir string) Bookkeeping {
	var b Bookkeeping
	for _, f := range []struct {
		dst  *string
		file string
	}{{&b.Setup, "setup.sql"}, {&b.Applied, "applied.sql"}, {&b.Record, "record.sql"}} {
		sql, err := fs.ReadFile(fsys, path.Join(dir, f.file))
		if err != nil {
			panic(fmt.Sprintf("migrate: embedded bookkeeping statements: %v", err))
		}
		*f.dst = string(sql)
	}
	return b
}

// Replace returns b with r's replacements made in each statement.
func (b Bookkeeping) Replace(r *strings.Replacer) Bookkeeping {
	return Bookkeeping{Setup: r.Replace(b.Setup), Applied: r.Replace(b.Applied), Record: r.Replace(b.Record)}
}
