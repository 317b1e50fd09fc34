// Package migrate applies numbered SQL migrations, embedded as files named
// NNN_name.up.sql, to a database, and records each applied version in a
// bookkeeping table. It is the one runner behind pgstore, sqlitestore and
// inbox (PostgreSQL and SQLite): each keeps its own bookkeeping table, lock
// key and public API, and hands the runner a [Plan].
//
// [Run] works in one transaction: it takes the lock that serialises the
// runs of every process ([Tx.Lock]), creates the bookkeeping table if it is
// absent, reads the versions already recorded, applies each missing
// migration in version order and records it, and commits. So concurrent
// runs apply each migration once, and a failing migration leaves the
// database as it was (all pending migrations are applied or none); its
// error names the migration's file.
//
// [SQLite] adapts a *sql.DB; package pgmigrate adapts a pgx pool (kept
// apart so that programs that use SQLite only do not link pgx).
package migrate

import (
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
)

// Migration is one numbered schema change.
type Migration struct {
	// Version orders migrations; Run applies each version once.
	Version int
	// Name describes the change ("create_outbox").
	Name string
	// SQL is the statement text.
	SQL string
}

// File is the name of m's file: NNN_name.up.sql.
func (m Migration) File() string { return fmt.Sprintf("%03d_%s.up.sql", m.Version, m.Name) }

// fileRe is the rule for a migration's file name.
var fileRe = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.up\.sql$`)

// Load reads the migrations in dir of fsys, in version order. Every file
// there must be named NNN_name.up.sql (NNN: the version in three digits;
// name: lower-case letters, digits and '_'), and the versions must run 1, 2, 3 ... without a gap or a repeat: a
// gap is a migration lost, a repeat two changes that each think they are
// that version. The error names the files at fault.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", dir, err)
	}
	var out []Migration
	for _, e := range entries {
		m := fileRe.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("migrate: %s is not a migration file named NNN_name.up.sql", path.Join(dir, e.Name()))
		}
		v, _ := strconv.Atoi(m[1]) // three digits
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrate: read %s: %w", path.Join(dir, e.Name()), err)
		}
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	slices.SortStableFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	if err := checkNumbering(dir, out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkNumbering reports the first migration of ms (in version order) that
// repeats a version or leaves a gap.
func checkNumbering(dir string, ms []Migration) error {
	for i, m := range ms {
		switch {
		case m.Version == i+1:
			continue
		case i == 0:
			return fmt.Errorf("migrate: %s has version %d; versions must start at 1",
				path.Join(dir, m.File()), m.Version)
		case m.Version == ms[i-1].Version:
			return fmt.Errorf("migrate: %s and %s have the same version %d; each version must be used once",
				path.Join(dir, ms[i-1].File()), path.Join(dir, m.File()), m.Version)
		default:
			return fmt.Errorf("migrate: %s follows %s; versions must have no gap (%03d is missing)",
				path.Join(dir, m.File()), path.Join(dir, ms[i-1].File()), i+1)
		}
	}
	return nil
}

// MustLoad is [Load] for migrations embedded in the program, whose error is
// a programming mistake: it panics with owner (the package) in the message.
func MustLoad(owner string, fsys fs.FS, dir string) []Migration {
	ms, err := Load(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("%s: embedded migrations: %v", owner, err))
	}
	return ms
}

// Render returns a copy of ms with render applied to each one's SQL (the
// user's placeholders filled in).
func Render(ms []Migration, render func(string) string) []Migration {
	out := slices.Clone(ms)
	for i := range out {
		out[i].SQL = render(out[i].SQL)
	}
	return out
}

// Copy converts ms to a user's own public migration type, which has the
// fields of [Migration]; nil stays nil.
func Copy[T ~struct {
	Version int
	Name    string
	SQL     string
}](ms []Migration) []T {
	if ms == nil {
		return nil
	}
	out := make([]T, len(ms))
	for i, m := range ms {
		out[i] = T(m)
	}
	return out
}

// LockKey is the 64-bit key of the lock named name (for PostgreSQL's
// advisory locks): its FNV-1a hash. Users name their locks after what
// they guard and the schema, so that schemas do not wait for each other.
func LockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}
