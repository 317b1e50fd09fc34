package outbox

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
)

// validMessage returns a message that passes every rule, so that a test can
// break exactly one.
func validMessage() Message {
	return Message{
		AggregateType: "Order",
		AggregateID:   "order-42",
		EventType:     "OrderPlaced",
		Payload:       []byte(`{"total":12.5}`),
	}
}

const sampleTraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// nameRuleCases are the rules every identifying string field obeys, as
// (suffix of the test name, bad value, rule text).
var nameRuleCases = []struct {
	name, value, rule string
}{
	{"leading space", " x", "white space"},
	{"trailing space", "x ", "white space"},
	{"leading tab", "\tx", "white space"},
	{"trailing newline", "x\n", "white space"},
	{"leading no-break space", "\u00a0x", "white space"},
	{"256 bytes", strings.Repeat("a", 256), "at most 255 bytes"},
	{"256 bytes of 2-byte runes", strings.Repeat("é", 128), "at most 255 bytes"},
	{"invalid UTF-8", "a\xffb", "valid UTF-8"},
	{"truncated UTF-8", "a\xc3", "valid UTF-8"},
	{"NUL", "a\x00b", "control characters"},
	{"inner tab", "a\tb", "control characters"},
	{"escape", "a\x1b[31mb", "control characters"},
	{"DEL", "a\x7fb", "control characters"},
	{"C1 NEL", "a\u0085b", "control characters"},
	{"C1 CSI", "a\u009b31mb", "control characters"},
}

type invalidCase struct {
	name   string
	limits Limits
	// at is the index of the bad message; the ones before it are valid.
	at     int
	mutate func(m *Message)
	field  string
	rule   string // a substring of ValidationError.Rule
}

func invalidCases() []invalidCase {
	var cases []invalidCase
	setters := []struct {
		field    string
		required bool
		set      func(m *Message, v string)
	}{
		{"aggregateType", true, func(m *Message, v string) { m.AggregateType = v }},
		{"aggregateId", true, func(m *Message, v string) { m.AggregateID = v }},
		{"eventType", true, func(m *Message, v string) { m.EventType = v }},
		{"correlationId", false, func(m *Message, v string) { m.CorrelationID = v }},
		{"causationId", false, func(m *Message, v string) { m.CausationID = v }},
	}
	for i, s := range setters {
		if s.required {
			cases = append(cases, invalidCase{
				name: s.field + " empty", at: i % 3, field: s.field, rule: "must not be empty",
				mutate: func(m *Message) { s.set(m, "") },
			})
		}
		for j, c := range nameRuleCases {
			cases = append(cases, invalidCase{
				name: s.field + " " + c.name, at: (i + j) % 3, field: s.field, rule: c.rule,
				mutate: func(m *Message) { s.set(m, c.value) },
			})
		}
	}

	add := func(name string, at int, field, rule string, mutate func(m *Message)) {
		cases = append(cases, invalidCase{name: name, at: at, field: field, rule: rule, mutate: mutate})
	}
	add("eventVersion -1", 1, "eventVersion", "must be 1 or more", func(m *Message) { m.EventVersion = -1 })

	const topicRule = "must be 1-249 characters"
	for i, topic := range []string{"orders events", "orders/created", "orders:v1", "ordérs", "orders\n", strings.Repeat("t", 250), ".", ".."} {
		add(fmt.Sprintf("topic %q", topic), i%3, "topic", topicRule, func(m *Message) { m.Topic = topic })
	}

	for i, tp := range []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",        // no flags
		"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",     // upper case
		"00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",      // short trace id
		"00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",     // separator
		" 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",    // padded
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-xx",  // extra field
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",     // forbidden version
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",     // zero trace id
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",     // zero parent id
		"00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",     // not hex
		"traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169", // junk
	} {
		add(fmt.Sprintf("traceparent %q", tp), i%3, "traceparent", "W3C traceparent", func(m *Message) { m.TraceParent = tp })
	}

	const mediaRule = "must be a media type"
	for i, c := range []struct{ ct, rule string }{
		{"json", mediaRule},
		{"attachment", mediaRule},
		{"application/", mediaRule},
		{"/json", mediaRule},
		{"application/json/x", mediaRule},
		{"application json", mediaRule},
		{"text/plain; charset", mediaRule},
		{"application/json; a=1; a=2", mediaRule},
		{"application/json ", "white space"},
		{"text/plain; a=\"\xff\"", "valid UTF-8"},
		{"application/" + strings.Repeat("x", 244), "at most 255 bytes"},
	} {
		add(fmt.Sprintf("contentType %q", c.ct), i%3, "contentType", c.rule, func(m *Message) { m.ContentType = c.ct })
	}

	add("payload nil", 2, "payload", "must not be empty", func(m *Message) { m.Payload = nil })
	add("payload empty", 0, "payload", "must not be empty", func(m *Message) { m.Payload = []byte{} })
	cases = append(cases, invalidCase{
		name: "payload over custom limit", limits: Limits{MaxPayloadBytes: 16}, at: 1,
		field: "payload", rule: "must be at most 16 bytes, is 17",
		mutate: func(m *Message) { m.Payload = []byte(`{"a":"` + strings.Repeat("x", 9) + `"}`) },
	})
	cases = append(cases, invalidCase{
		name: "payload over limit as text/plain", limits: Limits{MaxPayloadBytes: 3}, at: 0,
		field: "payload", rule: "must be at most 3 bytes, is 4",
		mutate: func(m *Message) { m.ContentType = "text/plain"; m.Payload = []byte("four") },
	})
	for i, c := range []struct{ ct, payload string }{
		{"", `{"a":`},                                // default application/json
		{"application/json", `not json`},             //
		{"application/json", `{"a":1}{"b":2}`},       // two values
		{"application/json", "\"\xff\""},             // invalid UTF-8 in a string
		{"Application/JSON; charset=utf-8", `{'a'}`}, // parameters and case
		{"application/cloudevents+json", `{"specversion":"1.0"`},
		{"application/vnd.orders.v1+json", `nope`},
	} {
		add(fmt.Sprintf("payload invalid JSON with %q", c.ct), i%3, "payload", "must be valid JSON", func(m *Message) {
			m.ContentType = c.ct
			m.Payload = []byte(c.payload)
		})
	}

	const nameRule = "name must be 1-255 characters"
	for i, name := range []string{"", "x tenant", "x/tenant", "x:tenant", "tenänt", "x\x00", strings.Repeat("h", 256)} {
		field := fmt.Sprintf("headers[%q]", name)
		add("header name "+field, i%3, field, nameRule, func(m *Message) { m.Headers = map[string]string{name: "v"} })
	}
	for i, name := range []string{"eventId", "EventID", "EVENTTYPE", "TraceParent", "tracestate", "contenttype", "AggregateId"} {
		field := fmt.Sprintf("headers[%q]", name)
		add("header reserved "+name, i%3, field, "name is reserved", func(m *Message) {
			m.Headers = map[string]string{name: "v"}
		})
	}
	add("header value invalid UTF-8", 2, `headers["x-tenant"]`, "value must be valid UTF-8", func(m *Message) {
		m.Headers = map[string]string{"x-tenant": "a\xfe"}
	})
	add("header value over the default limit", 1, `headers["x-note"]`, "value must be at most 8192 bytes, is 8193", func(m *Message) {
		m.Headers = map[string]string{"x-note": strings.Repeat("n", 8193)}
	})
	cases = append(cases, invalidCase{
		name: "header value over a custom limit", limits: Limits{MaxHeaderValueBytes: 3}, at: 0,
		field: `headers["x-tenant"]`, rule: "value must be at most 3 bytes, is 4",
		mutate: func(m *Message) { m.Headers = map[string]string{"x-tenant": "acme"} },
	})
	add("more headers than the default limit", 2, "headers", "must have at most 64 entries, has 65", func(m *Message) {
		m.Headers = map[string]string{}
		for i := range 65 {
			m.Headers[fmt.Sprintf("h%02d", i)] = "v"
		}
	})
	cases = append(cases, invalidCase{
		name: "more headers than a custom limit", limits: Limits{MaxHeaders: 1}, at: 1,
		field: "headers", rule: "must have at most 1 entries, has 2",
		mutate: func(m *Message) { m.Headers = map[string]string{"a": "1", "b": "2"} },
	})
	// Of several bad headers, the first by name is reported, every time.
	add("first bad header by name", 0, `headers["a b"]`, "name must be", func(m *Message) {
		m.Headers = map[string]string{"z z": "v", "eventId": "v", "a b": "v", "m": "\xff"}
	})
	return cases
}

// invalidUTF8Cases are, for every string field of a Message, a value with
// invalid UTF-8 and the field and rule Prepare reports for it.
func invalidUTF8Cases() []invalidCase {
	const bad = "ok\xffok"
	return []invalidCase{
		{name: "aggregateType", field: "aggregateType", rule: "must be valid UTF-8", mutate: func(m *Message) { m.AggregateType = bad }},
		{name: "aggregateId", field: "aggregateId", rule: "must be valid UTF-8", mutate: func(m *Message) { m.AggregateID = bad }},
		{name: "eventType", field: "eventType", rule: "must be valid UTF-8", mutate: func(m *Message) { m.EventType = bad }},
		{name: "topic", field: "topic", rule: "must be 1-249 characters of letters, digits", mutate: func(m *Message) { m.Topic = bad }},
		{name: "correlationId", field: "correlationId", rule: "must be valid UTF-8", mutate: func(m *Message) { m.CorrelationID = bad }},
		{name: "causationId", field: "causationId", rule: "must be valid UTF-8", mutate: func(m *Message) { m.CausationID = bad }},
		{name: "traceparent", field: "traceparent", rule: "must be a W3C traceparent", mutate: func(m *Message) {
			m.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333\xff-01"
		}},
		{name: "contentType", field: "contentType", rule: "must be valid UTF-8", mutate: func(m *Message) { m.ContentType = "text/plain; x=\"" + bad + "\"" }},
		{name: "header name", field: `headers["ok\xffok"]`, rule: "name must be 1-255 characters", mutate: func(m *Message) {
			m.Headers = map[string]string{bad: "v"}
		}},
		{name: "header value", field: `headers["x-tenant"]`, rule: "value must be valid UTF-8", mutate: func(m *Message) {
			m.Headers = map[string]string{"x-tenant": bad}
		}},
		{name: "JSON payload, inside a string", field: "payload", rule: "must be valid JSON", mutate: func(m *Message) {
			m.Payload = []byte(`{"customer":"` + bad + `"}`)
		}},
		{name: "JSON payload, inside a key", field: "payload", rule: "must be valid JSON", mutate: func(m *Message) {
			m.Payload = []byte(`{"` + bad + `":1}`)
		}},
		{name: "+json payload", field: "payload", rule: "must be valid JSON", mutate: func(m *Message) {
			m.ContentType = "application/cloudevents+json"
			m.Payload = []byte(`["` + bad + `"]`)
		}},
	}
}

// Invalid UTF-8 is refused in every string field, naming the field, and
// in a payload only when it is JSON: other payloads are bytes.
func TestPrepare_InvalidUTF8_IsRefusedInEveryStringField(t *testing.T) {
	t.Parallel()
	for _, c := range invalidUTF8Cases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := validMessage()
			c.mutate(&m)
			err := Validate(Limits{}, m)
			ve, ok := errors.AsType[*ValidationError](err)
			if !ok || ve.Field != c.field || !strings.Contains(ve.Rule, c.rule) {
				t.Fatalf("Validate = %v; want field %s refused with a rule containing %q", err, c.field, c.rule)
			}
		})
	}
	m := validMessage()
	m.ContentType = "application/octet-stream"
	m.Payload = []byte("ok\xffok")
	if err := Validate(Limits{}, m); err != nil {
		t.Errorf("a binary payload with bytes that are not UTF-8 was refused: %v", err)
	}
}

func TestPrepare_InvalidMessage_ReportsIndexFieldAndRule(t *testing.T) {
	t.Parallel()
	for _, c := range invalidCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			msgs := make([]Message, c.at+2) // a valid message after the bad one too
			for i := range msgs {
				msgs[i] = validMessage()
			}
			c.mutate(&msgs[c.at])

			out, err := Prepare(context.Background(), c.limits, msgs)
			if err == nil {
				t.Fatalf("Prepare accepted %+v", msgs[c.at])
			}
			if out != nil {
				t.Errorf("Prepare returned %d messages with an error; want nil", len(out))
			}
			if !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("errors.Is(%v, ErrInvalidMessage) = false", err)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T %v is not a *ValidationError", err, err)
			}
			if ve.Index != c.at || ve.Field != c.field {
				t.Errorf("Index, Field = %d, %q; want %d, %q", ve.Index, ve.Field, c.at, c.field)
			}
			if !strings.Contains(ve.Rule, c.rule) {
				t.Errorf("Rule = %q; want it to contain %q", ve.Rule, c.rule)
			}
			text := err.Error()
			for _, want := range []string{fmt.Sprintf("invalid message %d", c.at), c.field, ve.Rule} {
				if !strings.Contains(text, want) {
					t.Errorf("Error() = %q; want it to contain %q", text, want)
				}
			}

			// Validate applies the same rules.
			if verr := Validate(c.limits, msgs...); verr == nil || verr.Error() != text {
				t.Errorf("Validate = %v; want %q", verr, text)
			}
		})
	}
}

func TestPrepare_ValidMessage_IsAccepted(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		limits Limits
		mutate func(m *Message)
	}{
		{"minimal", Limits{}, func(m *Message) {}},
		{"255-byte fields", Limits{}, func(m *Message) {
			long := strings.Repeat("a", 255)
			m.AggregateType, m.AggregateID, m.EventType, m.CorrelationID, m.CausationID = long, long, long, long, long
		}},
		{"unicode and inner spaces", Limits{}, func(m *Message) {
			m.AggregateType = "Bestellung"
			m.AggregateID = "Kunde Müller / 東京 🚚"
			m.EventType = "Bestellung aufgegeben"
		}},
		{"eventVersion 7", Limits{}, func(m *Message) { m.EventVersion = 7 }},
		{"topic 249 characters", Limits{}, func(m *Message) { m.Topic = strings.Repeat("t", 249) }},
		{"topic with dots, dashes, underscores", Limits{}, func(m *Message) { m.Topic = "shop.orders_v1-EU" }},
		{"topic ...", Limits{}, func(m *Message) { m.Topic = "..." }},
		{"traceparent", Limits{}, func(m *Message) { m.TraceParent = sampleTraceParent }},
		{"traceparent unsampled", Limits{}, func(m *Message) {
			m.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
		}},
		{"text/plain non-JSON", Limits{}, func(m *Message) {
			m.ContentType = "text/plain; charset=utf-8"
			m.Payload = []byte("order 42 placed {")
		}},
		{"octet-stream binary", Limits{}, func(m *Message) {
			m.ContentType = "application/octet-stream"
			m.Payload = []byte{0xff, 0x00, 0xfe}
		}},
		{"cloudevents JSON", Limits{}, func(m *Message) {
			m.ContentType = "application/cloudevents+json"
			m.Payload = []byte(`{"specversion":"1.0","id":"1","source":"/orders","type":"OrderPlaced"}`)
		}},
		{"JSON scalar", Limits{}, func(m *Message) { m.Payload = []byte(` 42 `) }},
		{"payload exactly at custom limit", Limits{MaxPayloadBytes: 8}, func(m *Message) {
			m.Payload = []byte(`"123456"`)
		}},
		{"payload exactly at default limit", Limits{}, func(m *Message) {
			m.ContentType = "application/octet-stream"
			m.Payload = make([]byte, DefaultMaxPayloadBytes)
		}},
		{"headers at the default limits", Limits{}, func(m *Message) {
			m.Headers = map[string]string{}
			for i := range DefaultMaxHeaders {
				m.Headers[fmt.Sprintf("h%02d", i)] = strings.Repeat("v", DefaultMaxHeaderValueBytes)
			}
		}},
		{"headers at custom limits", Limits{MaxHeaders: 2, MaxHeaderValueBytes: 4}, func(m *Message) {
			m.Headers = map[string]string{"a": "acme", "b": "ü!"}
		}},
		{"headers", Limits{}, func(m *Message) {
			m.Headers = map[string]string{
				"x-tenant":               "acme",
				"X.Source_App-1":         "orders service, v1.2 🚀",
				"eventIdentifier":        "not reserved: only the exact names are",
				strings.Repeat("h", 255): "",
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := validMessage()
			c.mutate(&m)
			if _, err := Prepare(context.Background(), c.limits, []Message{m}); err != nil {
				t.Fatalf("Prepare: %v", err)
			}
		})
	}
}

func TestPrepare_EveryReservedHeader_IsRejectedInAnyCase(t *testing.T) {
	t.Parallel()
	for _, name := range ReservedHeaders {
		reason := "the relay sets " + name + " itself"
		if name == "tracestate" { // the relay sets no tracestate, but its traceparent
			reason = "tracestate goes with the traceparent the relay sets"
		}
		for _, spelled := range []string{name, strings.ToUpper(name), strings.ToLower(name)} {
			m := validMessage()
			m.Headers = map[string]string{spelled: "v"}
			err := Validate(Limits{}, m)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != fmt.Sprintf("headers[%q]", spelled) ||
				!strings.Contains(ve.Rule, "name is reserved: "+reason) {
				t.Errorf("header %q: err = %v; want it rejected as reserved", spelled, err)
			}
		}
	}
}

func TestPrepare_OptionalFields_MayBeEmpty(t *testing.T) {
	t.Parallel()
	m := validMessage()
	m.CorrelationID, m.CausationID, m.Topic, m.TraceParent, m.Headers = "", "", "", "", nil
	if err := Validate(Limits{}, m); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestPrepare_FillsDefaults(t *testing.T) {
	t.Parallel()
	out, err := Prepare(context.Background(), Limits{}, []Message{validMessage(), validMessage()})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range out {
		if m.ID == uuid.Nil {
			t.Fatalf("message %d: ID not set", i)
		}
		if v := m.ID.Version(); v != 7 {
			t.Errorf("message %d: ID %s is UUID version %d; want 7", i, m.ID, v)
		}
		if m.ID.Variant() != uuid.RFC4122 {
			t.Errorf("message %d: ID variant = %v; want RFC 4122", i, m.ID.Variant())
		}
		if m.EventVersion != 1 {
			t.Errorf("message %d: EventVersion = %d; want 1", i, m.EventVersion)
		}
		if m.ContentType != ContentTypeJSON || ContentTypeJSON != "application/json" {
			t.Errorf("message %d: ContentType = %q; want application/json", i, m.ContentType)
		}
		if m.TraceParent != "" {
			t.Errorf("message %d: TraceParent = %q without a span in ctx; want empty", i, m.TraceParent)
		}
		if m.Topic != "" {
			t.Errorf("message %d: Topic = %q; want empty (routing decides)", i, m.Topic)
		}
	}
	if out[0].ID == out[1].ID {
		t.Errorf("two messages got the same ID %s", out[0].ID)
	}
}

func TestPrepare_CallerValues_AreKept(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0190a4e0-7b2c-7c3d-8e4f-123456789abc")
	m := validMessage()
	m.ID = id
	m.EventVersion = 3
	m.ContentType = "application/cloudevents+json"
	m.Topic = "orders"
	m.CorrelationID = "corr-1"
	m.CausationID = "cmd-1"
	m.Headers = map[string]string{"x-tenant": "acme"}
	want := m
	want.TraceParent = "" // no span, nothing given

	out, err := Prepare(context.Background(), Limits{}, []Message{m})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out[0], want) {
		t.Errorf("Prepare changed a caller-given value:\n got %+v\nwant %+v", out[0], want)
	}

	// An ID that is not version 7 is the caller's choice too.
	m.ID = uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	out, err = Prepare(context.Background(), Limits{}, []Message{m})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].ID != m.ID {
		t.Errorf("ID = %s; want the caller's %s", out[0].ID, m.ID)
	}
}

func TestPrepare_DoesNotModifyInput(t *testing.T) {
	t.Parallel()
	in := []Message{validMessage(), validMessage()}
	in[1].Headers = map[string]string{"x-tenant": "acme"}
	snapshot := []Message{validMessage(), validMessage()}
	snapshot[1].Headers = map[string]string{"x-tenant": "acme"}

	ctx := trace.ContextWithSpanContext(context.Background(), fixedSpanContext(true))
	out, err := Prepare(ctx, Limits{}, in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, snapshot) {
		t.Fatalf("Prepare modified its input:\n got %+v\nwant %+v", in, snapshot)
	}
	// The result is a separate slice.
	out[0].AggregateID = "changed"
	if in[0].AggregateID != "order-42" {
		t.Error("the returned slice shares its array with the input")
	}

	// Nor on error, after defaults were filled in for earlier messages.
	in = append(in, Message{})
	if _, err := Prepare(ctx, Limits{}, in); err == nil {
		t.Fatal("Prepare accepted an empty message")
	}
	if !reflect.DeepEqual(in[:2], snapshot) || !reflect.DeepEqual(in[2], Message{}) {
		t.Fatalf("Prepare modified its input on error: %+v", in)
	}
}

func TestPrepare_EmptySlice(t *testing.T) {
	t.Parallel()
	out, err := Prepare(context.Background(), Limits{}, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("Prepare(nil) = %v, %v; want empty, nil", out, err)
	}
	if err := Validate(Limits{}); err != nil {
		t.Fatalf("Validate() = %v; want nil", err)
	}
}

// fixedSpanContext is a remote-style span context with fixed ids.
func fixedSpanContext(sampled bool) trace.SpanContext {
	cfg := trace.SpanContextConfig{
		TraceID: trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
		SpanID:  trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31},
	}
	if sampled {
		cfg.TraceFlags = trace.FlagsSampled
	}
	return trace.NewSpanContext(cfg)
}

func TestPrepare_TraceParent_FromSpanInContext(t *testing.T) {
	t.Parallel()
	ctx := trace.ContextWithSpanContext(context.Background(), fixedSpanContext(true))
	out, err := Prepare(ctx, Limits{}, []Message{validMessage(), validMessage()})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range out {
		if m.TraceParent != sampleTraceParent {
			t.Errorf("message %d: TraceParent = %q; want %q", i, m.TraceParent, sampleTraceParent)
		}
	}

	unsampled := trace.ContextWithSpanContext(context.Background(), fixedSpanContext(false))
	if got, want := TraceParentFromContext(unsampled), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"; got != want {
		t.Errorf("unsampled: TraceParentFromContext = %q; want %q", got, want)
	}
}

func TestPrepare_TraceParent_CallerGivenWins(t *testing.T) {
	t.Parallel()
	ctx := trace.ContextWithSpanContext(context.Background(), fixedSpanContext(true))
	const given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	m := validMessage()
	m.TraceParent = given
	out, err := Prepare(ctx, Limits{}, []Message{m, validMessage()})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].TraceParent != given {
		t.Errorf("TraceParent = %q; want the caller's %q", out[0].TraceParent, given)
	}
	if out[1].TraceParent != sampleTraceParent {
		t.Errorf("second message TraceParent = %q; want the span's %q", out[1].TraceParent, sampleTraceParent)
	}
}

func TestPrepare_TraceParent_NoValidSpan_IsEmpty(t *testing.T) {
	t.Parallel()
	for name, ctx := range map[string]context.Context{
		"no span":      context.Background(),
		"invalid span": trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}),
	} {
		out, err := Prepare(ctx, Limits{}, []Message{validMessage()})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].TraceParent != "" {
			t.Errorf("%s: TraceParent = %q; want empty", name, out[0].TraceParent)
		}
	}
}

func TestLimits_WithDefaults(t *testing.T) {
	t.Parallel()
	if got, want := (Limits{}).WithDefaults(), (Limits{MaxPayloadBytes: 1_000_000, MaxHeaders: 64, MaxHeaderValueBytes: 8192}); got != want {
		t.Errorf("zero Limits with defaults = %+v; want %+v", got, want)
	}
	given := Limits{MaxPayloadBytes: 10, MaxHeaders: 2, MaxHeaderValueBytes: 3}
	if got := given.WithDefaults(); got != given {
		t.Errorf("Limits %+v with defaults = %+v; want them kept", given, got)
	}
}

func TestLimits_Validate_NamesTheNegativeField(t *testing.T) {
	t.Parallel()
	for field, l := range map[string]Limits{
		"Limits.MaxPayloadBytes -1":     {MaxPayloadBytes: -1},
		"Limits.MaxHeaders -2":          {MaxHeaders: -2},
		"Limits.MaxHeaderValueBytes -3": {MaxHeaderValueBytes: -3},
	} {
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), field+" must not be negative") {
			t.Errorf("Validate(%+v) = %v; want an error naming %s", l, err, field)
		}
	}
	if err := (Limits{}).Validate(); err != nil {
		t.Errorf("Validate(zero Limits) = %v", err)
	}
}

// ValidateHeaders applies Enqueue's header rules to a stored message: the
// error has no index, and names the header and the rule.
func TestValidateHeaders_StoredMessage_NamesHeaderWithoutIndex(t *testing.T) {
	t.Parallel()
	err := ValidateHeaders(Limits{}, map[string]string{"x-tenant": "acme", "EventType": "Spoofed"})
	ve, ok := errors.AsType[*ValidationError](err)
	if !ok || !errors.Is(err, ErrInvalidMessage) || ve.Index != -1 {
		t.Fatalf("ValidateHeaders = %v; want a *ValidationError with Index -1", err)
	}
	if got, want := err.Error(), `outbox: invalid message: headers["EventType"]: name is reserved: the relay sets eventType itself`; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	if err := ValidateHeaders(Limits{MaxHeaders: 1}, map[string]string{"a": "1", "b": "2"}); err == nil {
		t.Error("ValidateHeaders ignored the limits given")
	}
	if err := ValidateHeaders(Limits{}, nil); err != nil {
		t.Errorf("ValidateHeaders(nil) = %v", err)
	}
}

func TestPrepare_DefaultPayloadLimit(t *testing.T) {
	t.Parallel()
	m := validMessage()
	m.ContentType = "application/octet-stream"
	m.Payload = make([]byte, DefaultMaxPayloadBytes+1)
	var ve *ValidationError
	if err := Validate(Limits{}, m); !errors.As(err, &ve) || ve.Field != "payload" {
		t.Fatalf("Validate = %v; want a payload error", err)
	}
}

func TestIsJSON(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json":                true,
		"Application/JSON":                true,
		"application/json; charset=utf-8": true,
		"application/cloudevents+json":    true,
		"application/vnd.orders.v1+json":  true,
		"application/problem+json; a=b":   true,
		"text/plain":                      false,
		"application/jsonx":               false,
		"application/json-seq":            false,
		"application/avro":                false,
		"text/json+xml":                   false,
		"":                                false,
		"not a media type;;":              false,
	} {
		if got := IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v; want %v", ct, got, want)
		}
	}
}

func TestValidationError_WrapsErrInvalidMessage(t *testing.T) {
	t.Parallel()
	var err error = &ValidationError{Index: 3, Field: "eventType", Rule: "must not be empty"}
	if !errors.Is(err, ErrInvalidMessage) {
		t.Error("errors.Is(ValidationError, ErrInvalidMessage) = false")
	}
	if got, want := err.Error(), "outbox: invalid message 3: eventType: must not be empty"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	wrapped := fmt.Errorf("enqueue: %w", err)
	var ve *ValidationError
	if !errors.As(wrapped, &ve) || ve.Index != 3 || !errors.Is(wrapped, ErrInvalidMessage) {
		t.Errorf("a wrapped ValidationError lost its identity: %v", wrapped)
	}
}
