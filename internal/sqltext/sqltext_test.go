package sqltext_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/outbox-dev/outbox/internal/sqltext"
)

var files = fstest.MapFS{
	"queries/get.sql":   {Data: []byte("SELECT * FROM {{schema}}.t")},
	"queries/count.sql": {Data: []byte("SELECT count(*) FROM {{schema}}.t")},
}

// Every destination gets its file's text, rendered; one file may fill
// several destinations.
func TestLoad_StoresEachFileRendered(t *testing.T) {
	t.Parallel()
	var get, count, again string
	render := strings.NewReplacer("{{schema}}", `"s"`).Replace
	err := sqltext.Load(files, "queries", render, map[*string]string{&get: "get.sql", &count: "count.sql", &again: "get.sql"})
	if err != nil {
		t.Fatal(err)
	}
	if get != `SELECT * FROM "s".t` || again != get || count != `SELECT count(*) FROM "s".t` {
		t.Fatalf("got %q, %q, %q", get, again, count)
	}
}

// Without a render function the text is stored as it is.
func TestLoad_NilRenderKeepsTheText(t *testing.T) {
	t.Parallel()
	var get string
	if err := sqltext.Load(files, "queries", nil, map[*string]string{&get: "get.sql"}); err != nil {
		t.Fatal(err)
	}
	if get != "SELECT * FROM {{schema}}.t" {
		t.Fatalf("got %q", get)
	}
}

// A missing file is an error that names it.
func TestLoad_MissingFileIsNamed(t *testing.T) {
	t.Parallel()
	var get string
	err := sqltext.Load(files, "queries", nil, map[*string]string{&get: "gone.sql"})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "queries/gone.sql") {
		t.Fatalf("err = %v, want fs.ErrNotExist naming queries/gone.sql", err)
	}
}
