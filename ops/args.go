package ops

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuidArray returns ids as a uuid[] argument; nil ids give an empty array.
// A []uuid.UUID would do with pgx's default query exec mode, which learns
// the parameter's type from the server, but not with exec or
// simple_protocol (the modes for a pooler in transaction mode), where pgx
// picks the type from the Go type alone and has none for it.
func uuidArray(ids []uuid.UUID) []pgtype.UUID {
	a := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		a[i] = pgtype.UUID{Bytes: id, Valid: true}
	}
	return a
}

// jsonArg returns a JSON document as a jsonb argument: NULL for nil, else
// its text. In the exec and simple_protocol query exec modes pgx sends a
// []byte as bytea, which a jsonb column refuses.
func jsonArg(doc []byte) any {
	if doc == nil {
		return nil
	}
	return string(doc)
}
