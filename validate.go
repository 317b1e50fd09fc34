package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
)

// Limits bound what Enqueue accepts. The zero value means the defaults.
//
// The relay's Kafka sink applies the header limits again before it
// publishes (kafka.Config.Limits), to rows written into the outbox table
// without Enqueue: give both the same Limits.
type Limits struct {
	// MaxPayloadBytes is the largest payload accepted. Defaults to
	// 1,000,000 bytes: Kafka's default message.max.bytes (1,048,588) less
	// room for the headers and the batch overhead. A payload the broker
	// still refuses becomes a dead letter with the broker's reason.
	MaxPayloadBytes int
	// MaxHeaders is the most entries Message.Headers may have. Defaults
	// to 64.
	MaxHeaders int
	// MaxHeaderValueBytes is the longest value of an entry of
	// Message.Headers, in bytes. Defaults to 8192, the size limit of a W3C
	// baggage header.
	MaxHeaderValueBytes int
}

// Defaults of [Limits].
const (
	// DefaultMaxPayloadBytes is the default of Limits.MaxPayloadBytes.
	DefaultMaxPayloadBytes = 1_000_000
	// DefaultMaxHeaders is the default of Limits.MaxHeaders.
	DefaultMaxHeaders = 64
	// DefaultMaxHeaderValueBytes is the default of Limits.MaxHeaderValueBytes.
	DefaultMaxHeaderValueBytes = 8192
)

// maxNameLen bounds the identifying string fields (types, ids, header names).
const maxNameLen = 255

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxPayloadBytes == 0 {
		l.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if l.MaxHeaders == 0 {
		l.MaxHeaders = DefaultMaxHeaders
	}
	if l.MaxHeaderValueBytes == 0 {
		l.MaxHeaderValueBytes = DefaultMaxHeaderValueBytes
	}
	return l
}

// Validate reports the first field of l that is negative, by name
// ("Limits.MaxHeaders -1 must not be negative"). Zero means the default.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxPayloadBytes", l.MaxPayloadBytes}, {"MaxHeaders", l.MaxHeaders}, {"MaxHeaderValueBytes", l.MaxHeaderValueBytes}} {
		if f.v < 0 {
			return fmt.Errorf("Limits.%s %d must not be negative", f.name, f.v)
		}
	}
	return nil
}

// ReservedHeaders are the Kafka headers the relay sets on every record, and
// tracestate, which belongs with the relay's traceparent. A message's own
// Headers must not use these names, compared case-insensitively: Enqueue
// refuses such a message, and the relay dead-letters a stored one (see
// [ValidateHeaders]).
var ReservedHeaders = []string{
	"eventId", "eventType", "eventVersion", "aggregateType", "aggregateId",
	"correlationId", "causationId", "traceparent", "tracestate", "contentType",
}

var (
	headerNameRe  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)
	topicRe       = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	traceparentRe = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)
)

// Prepare fills in defaults (ID, EventVersion, ContentType, TraceParent from
// ctx) and validates each message. It returns copies; msgs is not modified.
// On error nothing is returned, and the error is a *[ValidationError] naming
// the first bad field.
func Prepare(ctx context.Context, limits Limits, msgs []Message) ([]Message, error) {
	limits = limits.WithDefaults()
	out := make([]Message, len(msgs))
	var traceparent string
	traceLooked := false
	for i, m := range msgs {
		if m.ID == uuid.Nil {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("outbox: new message id: %w", err)
			}
			m.ID = id
		}
		if m.EventVersion == 0 {
			m.EventVersion = 1
		}
		if m.ContentType == "" {
			m.ContentType = ContentTypeJSON
		}
		if m.TraceParent == "" {
			if !traceLooked {
				traceparent = TraceParentFromContext(ctx)
				traceLooked = true
			}
			m.TraceParent = traceparent
		}
		if err := validate(i, &m, limits); err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// Validate checks msgs against the rules Enqueue applies, after defaults.
// It returns a *[ValidationError] for the first rule broken.
func Validate(limits Limits, msgs ...Message) error {
	_, err := Prepare(context.Background(), limits, msgs)
	return err
}

func validate(i int, m *Message, l Limits) error {
	bad := func(field, rule string) error { return &ValidationError{Index: i, Field: field, Rule: rule} }
	if err := checkName(m.AggregateType, true); err != "" {
		return bad("aggregateType", err)
	}
	if err := checkName(m.AggregateID, true); err != "" {
		return bad("aggregateId", err)
	}
	if err := checkName(m.EventType, true); err != "" {
		return bad("eventType", err)
	}
	if m.EventVersion < 1 {
		return bad("eventVersion", "must be 1 or more")
	}
	if m.Topic != "" && (!topicRe.MatchString(m.Topic) || m.Topic == "." || m.Topic == "..") {
		return bad("topic", "must be 1-249 characters of letters, digits, '.', '_' and '-', and not '.' or '..'")
	}
	if err := checkName(m.CorrelationID, false); err != "" {
		return bad("correlationId", err)
	}
	if err := checkName(m.CausationID, false); err != "" {
		return bad("causationId", err)
	}
	if m.TraceParent != "" && !validTraceParent(m.TraceParent) {
		return bad("traceparent", "must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")
	}
	if err := checkContentType(m.ContentType); err != "" {
		return bad("contentType", err)
	}
	if len(m.Payload) == 0 {
		return bad("payload", "must not be empty")
	}
	if len(m.Payload) > l.MaxPayloadBytes {
		return bad("payload", fmt.Sprintf("must be at most %d bytes, is %d", l.MaxPayloadBytes, len(m.Payload)))
	}
	// json.Valid lets invalid UTF-8 inside strings through; JSON exchanged
	// between systems must be UTF-8 (RFC 8259), and consumers reject it.
	if IsJSON(m.ContentType) && (!json.Valid(m.Payload) || !utf8.Valid(m.Payload)) {
		return bad("payload", "must be valid JSON for content type "+m.ContentType)
	}
	if field, rule := checkHeaders(m.Headers, l); rule != "" {
		return bad(field, rule)
	}
	return nil
}

// ValidateHeaders checks a message's own headers (Message.Headers) against
// the rules Enqueue applies to them under limits: at most
// Limits.MaxHeaders entries; names of 1-255 letters, digits, '.', '_' and
// '-' that are none of [ReservedHeaders] in any case; values of valid UTF-8
// of at most Limits.MaxHeaderValueBytes bytes. Names are checked in
// sorted order, so the error always names the same header.
//
// The relay's Kafka sink calls it before publishing a stored message, since
// a row written into the outbox table with plain SQL did not pass Enqueue.
// The error is a *[ValidationError] with Index -1.
func ValidateHeaders(limits Limits, headers map[string]string) error {
	if field, rule := checkHeaders(headers, limits.WithDefaults()); rule != "" {
		return &ValidationError{Index: -1, Field: field, Rule: rule}
	}
	return nil
}

// checkHeaders returns the field and rule of the first header that breaks
// a rule (see ValidateHeaders), or "", "". l has its defaults.
func checkHeaders(h map[string]string, l Limits) (field, rule string) {
	if len(h) == 0 {
		return "", ""
	}
	if len(h) > l.MaxHeaders {
		return "headers", fmt.Sprintf("must have at most %d entries, has %d", l.MaxHeaders, len(h))
	}
	for _, name := range slices.Sorted(maps.Keys(h)) {
		field := fmt.Sprintf("headers[%q]", name)
		if !headerNameRe.MatchString(name) {
			return field, "name must be 1-255 characters of letters, digits, '.', '_' and '-'"
		}
		if r := reservedAs(name); r != "" {
			return field, "name is reserved: " + reservedReason(r)
		}
		value := h[name]
		if !utf8.ValidString(value) {
			return field, "value must be valid UTF-8"
		}
		if len(value) > l.MaxHeaderValueBytes {
			return field, fmt.Sprintf("value must be at most %d bytes, is %d", l.MaxHeaderValueBytes, len(value))
		}
	}
	return "", ""
}

// reservedAs returns the reserved header that name is, compared
// case-insensitively (consumers often look headers up that way), or "".
func reservedAs(name string) string {
	for _, r := range ReservedHeaders {
		if strings.EqualFold(name, r) {
			return r
		}
	}
	return ""
}

// reservedReason says why the reserved header r is not a message's own.
func reservedReason(r string) string {
	if r == "tracestate" {
		return "tracestate goes with the traceparent the relay sets"
	}
	return "the relay sets " + r + " itself"
}

// checkName returns the broken rule for an identifying string, or "".
func checkName(s string, required bool) string {
	switch {
	case s == "" && required:
		return "must not be empty"
	case strings.TrimSpace(s) != s:
		return "must not start or end with white space"
	case len(s) > maxNameLen:
		return fmt.Sprintf("must be at most %d bytes", maxNameLen)
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case strings.ContainsFunc(s, unicode.IsControl): // C0, DEL and C1
		return "must not contain control characters"
	}
	return ""
}

// checkContentType returns the broken rule for a content type, or "". It is
// sent as a Kafka header, so it obeys the rules of the other names too.
func checkContentType(ct string) string {
	if err := checkName(ct, true); err != "" {
		return err
	}
	// ParseMediaType also accepts a bare disposition token ("attachment");
	// a media type has a subtype.
	if mt, _, err := mime.ParseMediaType(ct); err != nil || !strings.Contains(mt, "/") {
		return "must be a media type such as application/json"
	}
	return ""
}

// validTraceParent reports whether tp is a W3C traceparent: the pattern,
// a version other than ff, and trace and parent ids that are not all zero.
func validTraceParent(tp string) bool {
	const zeros = "00000000000000000000000000000000"
	return traceparentRe.MatchString(tp) && !strings.HasPrefix(tp, "ff-") &&
		tp[3:35] != zeros && tp[36:52] != zeros[:16]
}

// IsJSON reports whether a content type is JSON (application/json or a
// +json suffix type such as application/cloudevents+json).
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// TraceParentFromContext returns the W3C traceparent of the OpenTelemetry
// span in ctx, or "" when ctx carries no valid span.
func TraceParentFromContext(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}
