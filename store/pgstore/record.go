package pgstore

import (
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
)

// RecordColumns are the columns of outbox_messages that [ScanRecord] reads,
// in its order. Packages that query the table directly (ops) select them
// with it, so that the column list and the scan cannot drift apart.
const RecordColumns = "seq, id, aggregate_type, aggregate_id, event_type, event_version, " +
	"topic, payload, content_type, headers, correlation_id, causation_id, " +
	"traceparent, created_at, status, attempts, next_attempt_at, last_error, " +
	"lease_owner, lease_expires_at, published_at"

// ScanRecord scans one row of [RecordColumns] into a record. It is a
// pgx.RowToFunc, for pgx.CollectRows. A row whose headers are not a JSON
// object of string values (written with plain SQL before migration 015) is
// no error: its record has Invalid set and no Headers, so that one such row
// does not fail a read of many.
func ScanRecord(row pgx.CollectableRow) (outbox.Record, error) { return scanRecord(row) }
