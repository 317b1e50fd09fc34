package rowheaders_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/rowheaders"
)

func TestDecode_ReadsAnObjectOfStrings(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want map[string]string
	}{
		{"", nil},
		{"{}", nil},
		{" { } ", nil},
		{`{"tenant": "acme", "x-priority": "high \u00fcnicode"}`, map[string]string{"tenant": "acme", "x-priority": "high ünicode"}},
		{`{"empty": ""}`, map[string]string{"empty": ""}},
	} {
		got, err := rowheaders.Decode([]byte(tc.raw))
		if err != nil || !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("Decode(%q) = %#v, %v; want %#v", tc.raw, got, err, tc.want)
		}
	}
}

func TestDecode_RefusesOtherJSONNamingTheFieldAndRule(t *testing.T) {
	for _, tc := range []struct {
		raw, field, rule string
	}{
		{`{"x": 1}`, `headers["x"]`, "value must be a string, is a number"},
		{`{"x": null}`, `headers["x"]`, "value must be a string, is null"},
		{`{"x": true}`, `headers["x"]`, "value must be a string, is a boolean"},
		{`{"x": ["a"]}`, `headers["x"]`, "value must be a string, is an array"},
		{`{"x": {"a": "b"}}`, `headers["x"]`, "value must be a string, is an object"},
		// The first bad value by byte order of the names.
		{`{"b": 2, "a": "ok", "B": false}`, `headers["B"]`, "value must be a string, is a boolean"},
		{`[]`, "headers", "must be a JSON object of string values, is an array"},
		{`null`, "headers", "must be a JSON object of string values, is null"},
		{`"x"`, "headers", "must be a JSON object of string values, is a string"},
		{`7`, "headers", "must be a JSON object of string values, is a number"},
	} {
		got, err := rowheaders.Decode([]byte(tc.raw))
		var ve *outbox.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, outbox.ErrInvalidMessage) {
			t.Errorf("Decode(%q) = %v, %v; want a *outbox.ValidationError", tc.raw, got, err)
			continue
		}
		if ve.Index != -1 || ve.Field != tc.field || ve.Rule != tc.rule || got != nil {
			t.Errorf("Decode(%q) = %v, %+v; want nil, field %s, rule %q", tc.raw, got, ve, tc.field, tc.rule)
		}
	}
}
