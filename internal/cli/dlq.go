package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/ops"
)

// --all replays every dead letter and --group a whole group: they are taken
// from the command line only, never from an OUTBOX_ALL or OUTBOX_GROUP
// variable left set in some environment.
func init() { noEnv["all"], noEnv["group"] = true, true }

func newDLQCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "dlq",
		GroupID: "operate",
		Short:   "List, inspect, replay or discard dead letters",
		Long: `A message becomes a dead letter (status DEAD_LETTER) when the broker refused
it for good, or after --max-attempts failed attempts. It then blocks the
later messages of its aggregate, which the relay keeps in order.

  list      the dead letters, with filters; --group: grouped by cause
  show      one message: payload, headers, every attempt's error, its audit
  replay    back to PENDING with attempts reset; the relay publishes it and
            the messages behind it, in order
  discard   give up on it: DISCARDED, kept for audit; the aggregate flows on

An incident is usually one group: the dead letters with the same error
class (the broker's error code, such as MESSAGE_TOO_LARGE), topic and event
type. 'list --group' shows each group's key (16 hex digits); 'replay
--group KEY' and 'discard --group KEY' change the whole group, in batches
(--batch-size) at a bounded rate (--rate), keeping the order of each
aggregate.

replay and discard by id change every message named or none; by group or
filter, each batch commits on its own. Both record who (--actor), when,
why (--reason) and which messages in the audit log.`,
		Example: `  outbox dlq list --group
  outbox dlq replay --group 3f9a2c1b07d4e5a6 --reason "max.message.bytes raised"
  outbox dlq list --aggregate-type Order --since 24h
  outbox dlq show 1042
  outbox dlq replay 0190a1c2-... --reason "topic created"
  outbox dlq replay --event-type OrderPlaced --reason "schema registry fixed"
  outbox dlq discard 0190a1c2-... --reason "order was deleted; event obsolete"`,
		Args: noArgs,
	}
	cmd.AddCommand(newDLQListCommand(a), newDLQShowCommand(a), newDLQReplayCommand(a), newDLQDiscardCommand(a))
	return cmd
}

// dlqFilterFlags are the flags that select dead letters.
type dlqFilterFlags struct {
	aggregateType, aggregateID, eventType, errorClass, topic, since string
	limit                                                           int
	// group is --group KEY of replay and discard (list's --group groups).
	group string
}

func (f *dlqFilterFlags) add(fs *pflag.FlagSet, defaultLimit int) {
	fs.StringVar(&f.aggregateType, "aggregate-type", "", "only dead letters of this aggregate `type`")
	fs.StringVar(&f.aggregateID, "aggregate-id", "", "only dead letters of this aggregate `id`")
	fs.StringVar(&f.eventType, "event-type", "", "only dead letters of this event `type`")
	fs.StringVar(&f.errorClass, "error-class", "", "only dead letters of this error `class`, as 'list --group' shows it (MESSAGE_TOO_LARGE, \"max attempts: UNKNOWN_SERVER_ERROR\")")
	fs.StringVar(&f.topic, "topic", "", "only dead letters with this `topic` of their own (not one the relay's routes chose)")
	fs.StringVar(&f.since, "since", "", "only messages dead-lettered since `time`: RFC 3339, a date (2026-03-01), or an age (24h, 7d)")
	fs.IntVar(&f.limit, "limit", defaultLimit, "at most this many, oldest first (0: no limit)")
}

// addGroup adds --group KEY (replay and discard).
func (f *dlqFilterFlags) addGroup(fs *pflag.FlagSet) {
	fs.StringVar(&f.group, "group", "", "the dead letters of the group with this `key` (16 hex digits), as 'outbox dlq list --group' shows it")
}

// selects reports whether a flag that selects dead letters was given.
func (f *dlqFilterFlags) selects() bool {
	return f.aggregateType != "" || f.aggregateID != "" || f.eventType != "" || f.errorClass != "" ||
		f.topic != "" || f.group != "" || f.since != ""
}

func (f *dlqFilterFlags) filter() (ops.Filter, error) {
	out := ops.Filter{AggregateType: f.aggregateType, AggregateID: f.aggregateID, EventType: f.eventType,
		ErrorClass: f.errorClass, Topic: f.topic, Group: f.group, Limit: f.limit}
	if f.limit < 0 {
		return out, flagError("limit", "must not be negative, not %d", f.limit)
	}
	if out.Group = strings.ToLower(f.group); out.Group != "" && !ops.ValidGroupKey(out.Group) {
		return out, flagError("group", "must be a group's key, 16 hex digits as 'outbox dlq list --group' shows it, not %q", f.group)
	}
	if f.since != "" {
		t, err := parseTime(f.since, time.Now(), true)
		if err != nil {
			return out, flagError("since", "%v", err)
		}
		out.Since = t
	}
	return out, nil
}

func newDLQListCommand(a *app) *cobra.Command {
	var ff dlqFilterFlags
	var asJSON, grouped bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first, or grouped by cause",
		Long: `list prints the dead letters in enqueue order: seq, id, aggregate, event
type, attempts, when it became a dead letter, how many later messages of
its aggregate wait behind it, and the last error.

With --group it prints them grouped by cause, most first: the error class
(the Kafka error code of the last error, such as MESSAGE_TOO_LARGE, with
"max attempts: " before it when a retriable error ran out of attempts; the
error's reason when it has no code, without the message's id and topic,
cut to 80 characters), the topic and the event type, with each group's
key (16 hex digits), how many dead letters and aggregates it has, and when
its first and last message became dead letters. The topic is the
message's own: "(routed)" when it named none and the relay's routes chose
one. --limit then bounds the groups. Replay or discard a group with its key:
'outbox dlq replay --group KEY'.`,
		Example: `  outbox dlq list
  outbox dlq list --group
  outbox dlq list --group --since 24h --json
  outbox dlq list --event-type OrderPlaced --since 2026-03-01 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			o, pool, err := a.openOps(cmd.Context(), "dlq", ops.Config{})
			if err != nil {
				return err
			}
			defer pool.Close()
			if grouped {
				return a.listGroups(cmd.Context(), o, f, asJSON)
			}
			list, err := o.DeadLetters(cmd.Context(), f)
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]deadLetterJSON, len(list))
				for i, d := range list {
					out[i] = deadLetterJSON(d)
				}
				return writeJSON(a.stdout, out)
			}
			if len(list) == 0 {
				fmt.Fprintln(a.stdout, "no dead letters")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tID\tAGGREGATE\tEVENT TYPE\tATTEMPTS\tDEAD AT\tWAITING\tLAST ERROR")
			for _, d := range list {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%d\t%s\n", d.Seq, d.ID, termSafe(d.AggregateType+"/"+d.AggregateID),
					termSafe(d.EventType), d.Attempts, d.DeadAt.UTC().Format(time.RFC3339), d.Waiting, oneLine(d.LastError, 60))
			}
			tw.Flush()
			if f.Limit > 0 && len(list) == f.Limit {
				fmt.Fprintf(a.stdout, "(first %d shown; use --limit 0 for all)\n", f.Limit)
			}
			return nil
		},
	}
	ff.add(cmd.Flags(), 100)
	cmd.Flags().BoolVar(&grouped, "group", false, "group the dead letters by cause: error class, topic and event type")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

// deadLetterJSON is the JSON form of ops.DeadLetter.
type deadLetterJSON struct {
	Seq           int64     `json:"seq"`
	ID            uuid.UUID `json:"id"`
	AggregateType string    `json:"aggregateType"`
	AggregateID   string    `json:"aggregateId"`
	EventType     string    `json:"eventType"`
	Topic         string    `json:"topic"`
	CreatedAt     time.Time `json:"createdAt"`
	DeadAt        time.Time `json:"deadAt"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"lastError"`
	ErrorClass    string    `json:"errorClass"`
	Group         string    `json:"group"`
	Waiting       int64     `json:"waiting"`
}

// oneLine shortens s to one line of at most n characters, white space
// runs made one space and the rest made safe (termSafe).
func oneLine(s string, n int) string {
	s = termSafe(strings.Join(strings.Fields(s), " "))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func newDLQShowCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show SEQ|ID",
		Short: "Show one message: payload, headers, every attempt's error, its audit entries",
		Long: `show prints one message, whatever its status: its fields, headers and
payload, every failed attempt with its error, and the audit entries
(replay, discard) that name it. Name it by its seq or its id, the first
two columns of 'outbox dlq list'. Headers that cannot be read as a JSON
object of string values (a row written with plain SQL before migration
015) are printed as stored, with the reason.`,
		Example: `  outbox dlq show 1042
  outbox dlq show 0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f60
  outbox dlq show 0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f60 --json | jq -r .payload`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, bySeq := parseSeq(args[0])
			var id []uuid.UUID
			if !bySeq {
				var err error
				if id, err = parseIDs(args); err != nil {
					return &usageError{fmt.Errorf("%q is neither a seq nor a message id (a UUID)", args[0])}
				}
			}
			o, pool, err := a.openOps(cmd.Context(), "dlq", ops.Config{})
			if err != nil {
				return err
			}
			defer pool.Close()
			var d ops.DeadLetterDetail
			if bySeq {
				d, err = o.DeadLetterBySeq(cmd.Context(), seq)
			} else {
				d, err = o.DeadLetter(cmd.Context(), id[0])
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, detailJSON(d))
			}
			printDetail(a.stdout, d)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

// parseSeq parses a message's seq: a positive integer.
func parseSeq(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// printHeaders prints the message's own headers, or, when they could not
// be read (outbox.Record.Invalid), why, and the column as stored.
func printHeaders(w io.Writer, d ops.DeadLetterDetail) {
	r := d.Record
	if r.Invalid != nil {
		fmt.Fprintf(w, "\nHeaders: not readable: %s\n", termSafe(r.Invalid.Error()))
		if len(d.RawHeaders) > 0 {
			fmt.Fprintln(w, "  as stored:", termSafe(string(d.RawHeaders)))
		}
		return
	}
	fmt.Fprintln(w, "\nHeaders:")
	if len(r.Headers) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
		fmt.Fprintf(w, "  %s: %s\n", termSafe(k), termSafe(r.Headers[k]))
	}
}

// parseIDs parses message ids given as arguments.
func parseIDs(args []string) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, 0, len(args))
	for _, s := range args {
		id, err := uuid.Parse(s)
		if err != nil {
			return nil, &usageError{fmt.Errorf("%q is not a message id (a UUID)", s)}
		}
		ids = append(ids, id)
	}
	return ids, nil
}

type detailOutput struct {
	Seq           int64             `json:"seq"`
	ID            uuid.UUID         `json:"id"`
	Status        string            `json:"status"`
	AggregateType string            `json:"aggregateType"`
	AggregateID   string            `json:"aggregateId"`
	EventType     string            `json:"eventType"`
	EventVersion  int               `json:"eventVersion"`
	Topic         string            `json:"topic"`
	ContentType   string            `json:"contentType"`
	Headers       map[string]string `json:"headers"`
	CorrelationID string            `json:"correlationId"`
	CausationID   string            `json:"causationId"`
	TraceParent   string            `json:"traceparent"`
	CreatedAt     time.Time         `json:"createdAt"`
	PublishedAt   *time.Time        `json:"publishedAt"`
	DiscardedAt   *time.Time        `json:"discardedAt"`
	Attempts      int               `json:"attempts"`
	LastError     string            `json:"lastError"`
	Waiting       int64             `json:"waiting"`
	// Payload is the payload as text when it is valid UTF-8, else
	// PayloadBase64 holds it.
	Payload       *string          `json:"payload,omitempty"`
	PayloadBase64 []byte           `json:"payloadBase64,omitempty"`
	History       []attemptJSON    `json:"history"`
	Audit         []auditEntryJSON `json:"audit"`
	// Invalid says why the stored row is not a message that may be
	// published (outbox.Record.Invalid), and RawHeaders holds the headers
	// column as stored when it could not be read as headers; both are
	// absent otherwise.
	Invalid    string          `json:"invalid,omitempty"`
	RawHeaders json.RawMessage `json:"rawHeaders,omitempty"`
}

type attemptJSON struct {
	Attempt int       `json:"attempt"`
	Error   string    `json:"error"`
	Dead    bool      `json:"dead"`
	At      time.Time `json:"at"`
}

type auditEntryJSON struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	Actor      string          `json:"actor"`
	Action     string          `json:"action"`
	Reason     string          `json:"reason"`
	MessageIDs []uuid.UUID     `json:"messageIds"`
	Filter     json.RawMessage `json:"filter,omitempty"`
	Count      int64           `json:"count"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func detailJSON(d ops.DeadLetterDetail) detailOutput {
	r := d.Record
	out := detailOutput{
		Seq: r.Seq, ID: r.ID, Status: string(r.Status), AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		EventType: r.EventType, EventVersion: r.EventVersion, Topic: r.Topic, ContentType: r.ContentType,
		Headers: r.Headers, CorrelationID: r.CorrelationID, CausationID: r.CausationID, TraceParent: r.TraceParent,
		CreatedAt: r.CreatedAt, PublishedAt: timePtr(r.PublishedAt), DiscardedAt: timePtr(d.DiscardedAt),
		Attempts: r.Attempts, LastError: r.LastError, Waiting: d.Waiting,
		History: []attemptJSON{}, Audit: []auditEntryJSON{},
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	if r.Invalid != nil {
		out.Invalid, out.RawHeaders = r.Invalid.Error(), d.RawHeaders
	}
	if utf8.Valid(r.Payload) {
		p := string(r.Payload)
		out.Payload = &p
	} else {
		out.PayloadBase64 = r.Payload
	}
	for _, at := range d.Attempts {
		out.History = append(out.History, attemptJSON{at.Number, at.Error, at.Dead, at.At})
	}
	for _, e := range d.Audit {
		out.Audit = append(out.Audit, auditEntryJSON(e))
	}
	return out
}

func printDetail(w io.Writer, d ops.DeadLetterDetail) {
	r := d.Record
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%s\n", k, termSafe(fmt.Sprint(v))) }
	row("ID", r.ID)
	row("Seq", r.Seq)
	row("Status", r.Status)
	row("Aggregate", r.AggregateType+"/"+r.AggregateID)
	row("Event type", fmt.Sprintf("%s (version %d)", r.EventType, r.EventVersion))
	if r.Topic != "" {
		row("Topic", r.Topic)
	}
	row("Content type", r.ContentType)
	for _, k := range []struct{ name, v string }{{"Correlation id", r.CorrelationID}, {"Causation id", r.CausationID}, {"Traceparent", r.TraceParent}} {
		if k.v != "" {
			row(k.name, k.v)
		}
	}
	row("Created", r.CreatedAt.UTC().Format(time.RFC3339Nano))
	if !r.PublishedAt.IsZero() {
		row("Published", r.PublishedAt.UTC().Format(time.RFC3339Nano))
	}
	if !d.DiscardedAt.IsZero() {
		row("Discarded", d.DiscardedAt.UTC().Format(time.RFC3339Nano))
	}
	row("Attempts", r.Attempts)
	if r.LastError != "" {
		row("Last error", r.LastError)
	}
	row("Waiting behind it", d.Waiting)
	tw.Flush()

	printHeaders(w, d)
	fmt.Fprintln(w, "\nPayload:")
	fmt.Fprintln(w, indent(termLines(payloadText(r.Payload)), "  "))

	fmt.Fprintln(w, "\nAttempts:")
	if len(d.Attempts) == 0 {
		fmt.Fprintln(w, "  (none recorded)")
	} else {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tAT\tDEAD\tERROR")
		for _, at := range d.Attempts {
			fmt.Fprintf(tw, "  %d\t%s\t%v\t%s\n", at.Number, at.At.UTC().Format(time.RFC3339), at.Dead, oneLine(at.Error, 200))
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nAudit:")
	if len(d.Audit) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, e := range d.Audit {
		fmt.Fprintf(w, "  %s  %s by %s", e.At.UTC().Format(time.RFC3339), termSafe(e.Action), termSafe(e.Actor))
		if e.Reason != "" {
			fmt.Fprintf(w, ": %s", termSafe(e.Reason))
		}
		fmt.Fprintln(w)
	}
}

// payloadText is the payload for people: indented if it is JSON, as is if
// it is text, else its size.
func payloadText(p []byte) string {
	var buf bytes.Buffer
	if json.Valid(p) && json.Indent(&buf, p, "", "  ") == nil {
		return buf.String()
	}
	if utf8.Valid(p) {
		return string(p)
	}
	return fmt.Sprintf("(%d bytes of binary data; use --json for base64)", len(p))
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
