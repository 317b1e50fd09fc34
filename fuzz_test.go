package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// fuzzLimit and fuzzHeaderLimit are small so that the fuzzer reaches the
// size rules.
const (
	fuzzLimit       = 512
	fuzzHeaderLimit = 32
)

// fuzzLimits are the Limits the fuzz test prepares under.
var fuzzLimits = Limits{MaxPayloadBytes: fuzzLimit, MaxHeaderValueBytes: fuzzHeaderLimit}

// reservedForFuzz is written out independently of ReservedHeaders, so that
// dropping a name from that list fails the fuzz test.
var reservedForFuzz = []string{
	"eventId", "eventType", "eventVersion", "aggregateType", "aggregateId",
	"correlationId", "causationId", "traceparent", "tracestate", "contentType",
}

// FuzzPrepare checks that Prepare never panics, that whatever it accepts
// satisfies every rule (re-checked here independently of validate.go), that
// it accepts whatever satisfies them, and that what it rejects is reported
// as a *ValidationError wrapping ErrInvalidMessage.
func FuzzPrepare(f *testing.F) {
	f.Add("order-42", "OrderPlaced", []byte(`{"total":1}`), "x-tenant", "acme", "")
	f.Add("order-42", "OrderPlaced", []byte(`{"total":1}`), "x-tenant", "acme", "application/json")
	f.Add("Kunde Müller", "Bestellung aufgegeben", []byte(`[1,"ü"]`), "X.Src_1", "v🚀", "application/cloudevents+json")
	f.Add("", "OrderPlaced", []byte(`{}`), "x", "v", "")
	f.Add(" padded", "OrderPlaced", []byte(`{}`), "x", "v", "")
	f.Add("a\u0085b", "OrderPlaced", []byte(`{}`), "x", "v", "")
	f.Add("a\x7fb", "E\x00", []byte(`{}`), "x", "v", "")
	f.Add("\xff", "\xc3", []byte(`{}`), "x", "v", "")
	f.Add(strings.Repeat("a", 255), strings.Repeat("é", 128), []byte(`{}`), "x", "v", "")
	f.Add("id", "E", []byte(`{"a":`), "x", "v", "application/json")
	f.Add("id", "E", []byte("\"\xff\""), "x", "v", "application/json")
	f.Add("id", "E", []byte(`{}{}`), "x", "v", "application/vnd.a+json; charset=utf-8")
	f.Add("id", "E", []byte("not json"), "x", "v", "text/plain")
	f.Add("id", "E", []byte{}, "x", "v", "text/plain")
	f.Add("id", "E", []byte(strings.Repeat("x", fuzzLimit+1)), "x", "v", "application/octet-stream")
	f.Add("id", "E", []byte(`{}`), "EventID", "v", "")
	f.Add("id", "E", []byte(`{}`), "TRACESTATE", "v", "")
	f.Add("id", "E", []byte(`{}`), "", "v", "")
	f.Add("id", "E", []byte(`{}`), "bad name", "v", "")
	f.Add("id", "E", []byte(`{}`), "x", "\xfe", "")
	f.Add("id", "E", []byte(`{}`), "x", strings.Repeat("v", fuzzHeaderLimit+1), "")
	f.Add("id", "E", []byte(`{}`), "x", "v", "attachment")
	f.Add("id", "E", []byte(`{}`), "x", "v", "text/plain; a=\"\xff\"")
	f.Add("id", "E", []byte(`{}`), "x", "v", "text/plain; charset")
	f.Add("id", "E", []byte(`{}`), "x", "v", " application/json")

	f.Fuzz(func(t *testing.T, aggregateID, eventType string, payload []byte, headerName, headerValue, contentType string) {
		in := Message{
			AggregateType: "Order",
			AggregateID:   aggregateID,
			EventType:     eventType,
			Payload:       payload,
			ContentType:   contentType,
			Headers:       map[string]string{headerName: headerValue},
		}
		inCopy := in
		inCopy.Payload = bytes.Clone(payload)
		inCopy.Headers = map[string]string{headerName: headerValue}

		out, err := Prepare(context.Background(), fuzzLimits, []Message{in})

		if !reflect.DeepEqual(in, inCopy) {
			t.Fatalf("Prepare modified its input: %+v", in)
		}
		broken := brokenRule(aggregateID, eventType, payload, headerName, headerValue, contentType)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("error %T %v is not a *ValidationError wrapping ErrInvalidMessage", err, err)
			}
			if ve.Index != 0 || ve.Field == "" || ve.Rule == "" {
				t.Fatalf("incomplete ValidationError %+v", ve)
			}
			if out != nil {
				t.Fatalf("Prepare returned messages along with error %v", err)
			}
			if broken == "" {
				t.Fatalf("Prepare rejected a message that keeps every rule: %v", err)
			}
			return
		}
		if broken != "" {
			t.Fatalf("Prepare accepted a message that breaks a rule: %s", broken)
		}
		if len(out) != 1 {
			t.Fatalf("Prepare returned %d messages; want 1", len(out))
		}
		m := out[0]
		if m.ID == uuid.Nil || m.ID.Version() != 7 {
			t.Errorf("ID = %s; want a UUIDv7", m.ID)
		}
		if m.EventVersion != 1 {
			t.Errorf("EventVersion = %d; want 1", m.EventVersion)
		}
		wantCT := contentType
		if wantCT == "" {
			wantCT = ContentTypeJSON
		}
		if m.AggregateID != aggregateID || m.EventType != eventType || m.ContentType != wantCT ||
			string(m.Payload) != string(payload) || m.Headers[headerName] != headerValue {
			t.Errorf("Prepare changed a caller-given field: %+v", m)
		}
		// The output keeps every rule, checked on the output's own fields.
		if r := brokenRule(m.AggregateID, m.EventType, m.Payload, headerName, m.Headers[headerName], m.ContentType); r != "" {
			t.Errorf("accepted output breaks a rule: %s", r)
		}
		// And it stays valid: Enqueue may prepare a prepared message again.
		if err := Validate(fuzzLimits, m); err != nil {
			t.Errorf("Validate(Prepare output) = %v", err)
		}
	})
}

// brokenRule returns a description of the first rule the fuzzed fields
// break, or "" if they keep all of them. It restates the documented rules
// without calling into validate.go.
func brokenRule(aggregateID, eventType string, payload []byte, headerName, headerValue, contentType string) string {
	if r := nameProblem(aggregateID); r != "" {
		return "aggregateId " + r
	}
	if r := nameProblem(eventType); r != "" {
		return "eventType " + r
	}
	if contentType == "" {
		contentType = "application/json"
	}
	if r := nameProblem(contentType); r != "" {
		return "contentType " + r
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "contentType: " + err.Error()
	}
	typ, sub, ok := strings.Cut(mediaType, "/")
	if !ok || typ == "" || sub == "" {
		return "contentType has no subtype"
	}
	if len(payload) == 0 {
		return "payload empty"
	}
	if len(payload) > fuzzLimit {
		return "payload too large"
	}
	isJSON := mediaType == "application/json" || strings.HasSuffix(sub, "+json")
	if isJSON {
		var v any
		if !utf8.Valid(payload) || json.Unmarshal(payload, &v) != nil {
			return "payload not JSON"
		}
	}
	if len(headerName) == 0 || len(headerName) > 255 {
		return "header name length"
	}
	for i := 0; i < len(headerName); i++ {
		c := headerName[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "header name character"
		}
	}
	for _, r := range reservedForFuzz {
		if strings.EqualFold(headerName, r) {
			return "header name reserved"
		}
	}
	if !utf8.ValidString(headerValue) {
		return "header value not UTF-8"
	}
	if len(headerValue) > fuzzHeaderLimit {
		return "header value too long"
	}
	return ""
}

// nameProblem restates the rules of identifying strings: non-empty, at most
// 255 bytes, valid UTF-8, no control characters, no surrounding white space.
func nameProblem(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > 255:
		return "longer than 255 bytes"
	case !utf8.ValidString(s):
		return "not UTF-8"
	}
	for _, r := range s {
		if r < 0x20 || 0x7f <= r && r <= 0x9f {
			return "has a control character"
		}
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return "has surrounding white space"
	}
	return ""
}
