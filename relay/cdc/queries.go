package cdc

import (
	"embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/internal/sqltext"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// queries are the rendered SQL texts, with the schema and publication
// filled in.
type queries struct {
	setup, setupLock, settings                  string
	publicationGet, publicationCreate           string
	publicationViaRoot, lockInserts             string
	slotGet, slotCreate, slotDrop               string
	registryGet, registryPut, deferUnsent       string
	check, recordMark, recordDelete             string
	heartbeat, lag, tableClaim, tableDeleteSent string
	tableRelease, tableReleaseKeep              string
	// The lease of the active relay (lead.go).
	leaseSetup, leaseTake, leaseSeize, leaseRenew string
	leaseRelease, leaseTerminate, backendSelf     string
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
	err := sqltext.Load(sqlFiles, "sql", r.Replace, map[*string]string{
		&q.setup:              "setup.sql",
		&q.setupLock:          "setup_lock.sql",
		&q.settings:           "settings.sql",
		&q.publicationGet:     "publication_get.sql",
		&q.publicationCreate:  "publication_create.sql",
		&q.publicationViaRoot: "publication_via_root.sql",
		&q.lockInserts:        "lock_inserts.sql",
		&q.slotGet:            "slot_get.sql",
		&q.slotCreate:         "slot_create.sql",
		&q.slotDrop:           "slot_drop.sql",
		&q.registryGet:        "registry_get.sql",
		&q.registryPut:        "registry_put.sql",
		&q.deferUnsent:        "defer_unsent.sql",
		&q.check:              "check.sql",
		&q.recordMark:         "record.sql",
		&q.recordDelete:       "record.sql",
		&q.heartbeat:          "heartbeat.sql",
		&q.lag:                "lag.sql",
		&q.tableClaim:         "table_claim.sql",
		&q.tableDeleteSent:    "table_delete_sent.sql",
		&q.tableRelease:       "table_release.sql",
		&q.tableReleaseKeep:   "table_release_keep.sql",
		&q.leaseSetup:         "lease_setup.sql",
		&q.leaseTake:          "lease_take.sql",
		&q.leaseSeize:         "lease_seize.sql",
		&q.leaseRenew:         "lease_renew.sql",
		&q.leaseRelease:       "lease_release.sql",
		&q.leaseTerminate:     "lease_terminate.sql",
		&q.backendSelf:        "backend_self.sql",
	})
	if err != nil {
		return queries{}, fmt.Errorf("cdc: %w", err)
	}
	// Statements that take a part from another file in place of a
	// placeholder: record.sql the statement for acknowledged messages
	// (record_mark.sql or record_delete.sql), the takeover's statements
	// the query of the lease's holder.
	var mark, del, holder string
	render := func(sql string) string { return strings.TrimRight(r.Replace(sql), "\n") }
	err = sqltext.Load(sqlFiles, "sql", render, map[*string]string{
		&mark: "record_mark.sql", &del: "record_delete.sql", &holder: "lease_holder.sql",
	})
	if err != nil {
		return queries{}, fmt.Errorf("cdc: %w", err)
	}
	q.recordMark = strings.Replace(q.recordMark, "{{sent}}", mark, 1)
	q.recordDelete = strings.Replace(q.recordDelete, "{{sent}}", del, 1)
	q.leaseSeize = strings.Replace(q.leaseSeize, "{{lease_holder}}", holder, 1)
	q.leaseTerminate = strings.Replace(q.leaseTerminate, "{{lease_holder}}", holder, 1)
	return q, nil
}
