// Package rowheaders reads the headers column of an outbox row: the
// message's own headers (outbox.Message.Headers) as a JSON object whose
// values are strings, which is what the stores write and what the tables
// accept (PostgreSQL migration 015, SQLite migration 002). A row written
// with plain SQL before the table refused other JSON may hold anything; the
// stores and CDC decode each row's headers with [Decode], so that such a
// row is reported as invalid with the rule it breaks, alone, instead of
// failing the read of every row beside it.
package rowheaders

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/outbox-dev/outbox"
)

// Decode returns the headers that raw, the column's JSON text, holds: nil
// for an empty object (or an empty column). When raw is not a JSON object
// whose values are all strings, it returns a *outbox.ValidationError with
// Index -1 naming the column (headers, or headers["name"] for the first
// such value by byte order of the names) and the rule, such as
//
//	headers["x"]: value must be a string, is a number
//
// JSON null is not an object: it is refused like any other non-object.
func Decode(raw []byte) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "{}" {
		return nil, nil
	}
	if k := kind(raw); k != "an object" {
		return nil, invalid("headers", "must be a JSON object of string values, is "+k)
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, invalid("headers", "must be a JSON object of string values: "+err.Error())
	}
	if len(values) == 0 {
		return nil, nil
	}
	h := make(map[string]string, len(values))
	for _, name := range slices.Sorted(maps.Keys(values)) {
		v := values[name]
		field := fmt.Sprintf("headers[%q]", name)
		if k := kind(v); k != "a string" {
			return nil, invalid(field, "value must be a string, is "+k)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, invalid(field, "value must be a string: "+err.Error())
		}
		h[name] = s
	}
	return h, nil
}

// kind names the JSON kind of the value v starts with, as the rules say it
// ("a number").
func kind(v []byte) string {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func invalid(field, rule string) error {
	return &outbox.ValidationError{Index: -1, Field: field, Rule: rule}
}
