package cdc

import (
	"embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// queries are the rendered SQL texts, with the schema and publication
// filled in.
type queries struct {
	setup, setupLock, settings                   string
	publicationGet, publicationCreate            string
	slotGet, slotCreate, slotDrop                string
	registryGet, registryPut, deferUnsent        string
	check, deferAggs, fail, markSent, deleteSent string
	heartbeat, lag, tableClaim, tableDeleteSent  string
}

// loadQueries reads the embedded SQL and fills in {{schema}} and
// {{publication}} with the quoted identifiers. Both names were validated
// before (pgstore's schema rule, nameRe), and are quoted besides.
func loadQueries(schema, publication string) (queries, error) {
	var q queries
	r := strings.NewReplacer(
		"{{schema}}", pgx.Identifier{schema}.Sanitize(),
		"{{publication}}", pgx.Identifier{publication}.Sanitize(),
	)
	for _, f := range []struct {
		dst  *string
		file string
	}{
		{&q.setup, "setup.sql"},
		{&q.setupLock, "setup_lock.sql"},
		{&q.settings, "settings.sql"},
		{&q.publicationGet, "publication_get.sql"},
		{&q.publicationCreate, "publication_create.sql"},
		{&q.slotGet, "slot_get.sql"},
		{&q.slotCreate, "slot_create.sql"},
		{&q.slotDrop, "slot_drop.sql"},
		{&q.registryGet, "registry_get.sql"},
		{&q.registryPut, "registry_put.sql"},
		{&q.deferUnsent, "defer_unsent.sql"},
		{&q.check, "check.sql"},
		{&q.deferAggs, "defer.sql"},
		{&q.fail, "fail.sql"},
		{&q.markSent, "mark_sent.sql"},
		{&q.deleteSent, "delete_sent.sql"},
		{&q.heartbeat, "heartbeat.sql"},
		{&q.lag, "lag.sql"},
		{&q.tableClaim, "table_claim.sql"},
		{&q.tableDeleteSent, "table_delete_sent.sql"},
	} {
		b, err := sqlFiles.ReadFile("sql/" + f.file)
		if err != nil {
			return queries{}, fmt.Errorf("cdc: read embedded %s: %w", f.file, err)
		}
		*f.dst = r.Replace(string(b))
	}
	return q, nil
}
