package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/ops"
)

func newStatsCommand(a *app) *cobra.Command {
	var (
		asJSON bool
		exact  bool
		top    int
	)
	cmd := &cobra.Command{
		Use:     "stats",
		GroupID: "operate",
		Short:   "Show the outbox's state: counts by status, lag, blocked aggregates, failing event types",
		Long: `stats prints a snapshot of the outbox table:

  - the messages in each status (PENDING, IN_FLIGHT, SENT, FAILED,
    DEAD_LETTER, DISCARDED);
  - the age of the oldest unsent message, i.e. how far the relay is behind;
  - the messages marked SENT in the last minute (all relays together);
  - the blocked aggregates: aggregates whose first unsent message is a dead
    letter with later messages waiting behind it (see 'outbox dlq');
  - the event types with the most FAILED and DEAD_LETTER messages;
  - the relay mode (claim, cursor or cdc, since when, who switched; see
    'outbox mode') and, in cursor mode, the cursor: its
    position, when it was saved, its leader and lease, and its lag (see
    'outbox cursor').

In cursor mode a QUEUED message counts as PENDING until the cursor's
position passed it and as SENT after; the oldest unsent age includes it.
The cursor records no publish times, so "sent last minute" counts only the
messages marked SENT (the table path): the cursor's throughput needs two
readings a minute apart, which the relay's status page and metrics make.

Every figure is read through an index or from the unsent rows only, so it
is cheap on any table size. The SENT count is counted while the table is
small (below 100,000 rows by PostgreSQL's statistics); on a larger table it
is PostgreSQL's estimate (kept by autovacuum; in cursor mode plus the
QUEUED messages the statistics know of, less the lag), shown as "~N
(estimate)", unless --exact, which counts them and costs in proportion to
the SENT history.

With --json it prints one JSON object for scripts; durations are in
seconds.`,
		Example: `  outbox stats
  outbox stats --json | jq .counts.DEAD_LETTER`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if top < 1 {
				return flagError("top", "must be at least 1, not %d", top)
			}
			o, pool, err := a.openOps(cmd.Context(), "stats", ops.Config{Top: top, ExactSentCount: exact})
			if err != nil {
				return err
			}
			defer pool.Close()
			s, err := o.Stats(cmd.Context())
			if err != nil {
				return fmt.Errorf("read stats of schema %s: %w", o.Schema(), err)
			}
			if asJSON {
				return writeJSON(a.stdout, statsJSON(s))
			}
			printStats(a.stdout, s)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.Flags().BoolVar(&exact, "exact", false, "count the SENT messages exactly on a large table too, instead of using PostgreSQL's estimate (reads the whole SENT index)")
	cmd.Flags().IntVar(&top, "top", ops.DefaultTop, "how many blocked aggregates and failing event types to list")
	return cmd
}

// statsOutput is the JSON form of ops.Stats.
type statsOutput struct {
	At                     time.Time              `json:"at"`
	Counts                 map[string]int64       `json:"counts"`
	SentEstimated          bool                   `json:"sentEstimated"`
	OldestUnsentAt         *time.Time             `json:"oldestUnsentAt"`
	OldestUnsentAgeSeconds float64                `json:"oldestUnsentAgeSeconds"`
	SentLastMinute         int64                  `json:"sentLastMinute"`
	BlockedAggregates      int64                  `json:"blockedAggregates"`
	Blocked                []blockedAggregateJSON `json:"blocked"`
	TopFailing             []failingEventTypeJSON `json:"topFailingEventTypes"`
	Mode                   ops.Mode               `json:"mode"`
	Cursor                 cursorJSON             `json:"cursor"`
	CursorSent             int64                  `json:"cursorSent"`
	CursorSentLastMinute   int64                  `json:"cursorSentLastMinute"`
	Topics                 []topicJSON            `json:"topics"`
}

type topicJSON struct {
	Topic             string     `json:"topic"`
	PublishedLastHour int64      `json:"publishedLastHour"`
	LastPublishedAt   *time.Time `json:"lastPublishedAt"`
	Unavailable       bool       `json:"unavailable"`
	UnavailableSince  *time.Time `json:"unavailableSince,omitempty"`
	Reason            string     `json:"reason,omitempty"`
	Fix               string     `json:"fix,omitempty"`
}

func newTopicJSON(t ops.Topic) topicJSON {
	out := topicJSON{Topic: t.Topic, PublishedLastHour: t.PublishedLastHour, Unavailable: t.Unavailable(), Reason: t.Reason, Fix: t.Fix}
	if !t.LastPublishedAt.IsZero() {
		out.LastPublishedAt = &t.LastPublishedAt
	}
	if t.Unavailable() {
		out.UnavailableSince = &t.UnavailableSince
	}
	return out
}

type blockedAggregateJSON struct {
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
	DeadLetterID  string `json:"deadLetterId"`
	EventType     string `json:"eventType"`
	Waiting       int64  `json:"waiting"`
}

type failingEventTypeJSON struct {
	EventType  string `json:"eventType"`
	Failed     int64  `json:"failed"`
	DeadLetter int64  `json:"deadLetter"`
}

func statsJSON(s ops.Stats) statsOutput {
	out := statsOutput{
		At: s.At, Counts: map[string]int64{}, SentEstimated: s.SentEstimated,
		OldestUnsentAgeSeconds: s.OldestUnsentAge.Seconds(), SentLastMinute: s.SentLastMinute,
		BlockedAggregates: s.BlockedAggregates,
		Blocked:           []blockedAggregateJSON{}, TopFailing: []failingEventTypeJSON{},
		Mode: s.Cursor.Mode, Cursor: newCursorJSON(s.Cursor),
		CursorSent: s.CursorSent, CursorSentLastMinute: s.CursorSentLastMinute,
		Topics: []topicJSON{},
	}
	for _, t := range s.Topics {
		out.Topics = append(out.Topics, newTopicJSON(t))
	}
	for st, n := range s.Counts {
		out.Counts[string(st)] = n
	}
	if !s.OldestUnsentAt.IsZero() {
		out.OldestUnsentAt = &s.OldestUnsentAt
	}
	for _, b := range s.Blocked {
		out.Blocked = append(out.Blocked, blockedAggregateJSON{b.AggregateType, b.AggregateID, b.DeadLetterID.String(), b.EventType, b.Waiting})
	}
	for _, f := range s.TopFailing {
		out.TopFailing = append(out.TopFailing, failingEventTypeJSON{f.EventType, f.Failed, f.DeadLetter})
	}
	return out
}

func printStats(w io.Writer, s ops.Stats) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tMESSAGES")
	for _, st := range ops.Statuses {
		n := fmt.Sprint(s.Counts[st])
		if st == "SENT" && s.SentEstimated {
			n = "~" + n + " (estimate)"
		}
		fmt.Fprintf(tw, "%s\t%s\n", st, n)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if s.OldestUnsentAt.IsZero() {
		fmt.Fprintln(w, "Oldest unsent:      none")
	} else {
		fmt.Fprintf(w, "Oldest unsent:      %s old (created %s)\n", s.OldestUnsentAge.Round(time.Millisecond), s.OldestUnsentAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "Sent last minute:   %d", s.SentLastMinute)
	if s.CursorSentLastMinute < 0 {
		fmt.Fprint(w, " (marked SENT; the cursor's messages are not counted: it records no publish times)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Blocked aggregates: %d\n", s.BlockedAggregates)
	printCursor(w, s.Cursor)
	printTopics(w, s)
	if len(s.Blocked) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BLOCKED AGGREGATE\tDEAD LETTER\tEVENT TYPE\tWAITING")
		for _, b := range s.Blocked {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", termSafe(b.AggregateType+"/"+b.AggregateID), b.DeadLetterID, termSafe(b.EventType), b.Waiting)
		}
		tw.Flush()
	}
	if len(s.TopFailing) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FAILING EVENT TYPE\tFAILED\tDEAD_LETTER")
		for _, f := range s.TopFailing {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", termSafe(f.EventType), f.Failed, f.DeadLetter)
		}
		tw.Flush()
	}
}

// printTopics lists the topics the running relays reported, those that
// cannot take records first.
func printTopics(w io.Writer, s ops.Stats) {
	fmt.Fprintln(w)
	if len(s.Topics) == 0 {
		fmt.Fprintln(w, "Topics:             none reported by a relay in the last minute")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPUBLISHED LAST HOUR\tLAST PUBLISHED\tSTATE")
	for _, t := range s.Topics {
		last := "never"
		if !t.LastPublishedAt.IsZero() {
			last = max(s.At.Sub(t.LastPublishedAt), 0).Round(time.Second).String() + " ago"
		}
		state := "ok"
		if t.Unavailable() {
			state = fmt.Sprintf("CANNOT TAKE RECORDS since %s ago: %s; its messages wait (%s)",
				max(s.At.Sub(t.UnavailableSince), 0).Round(time.Second), termSafe(t.Reason), termSafe(t.Fix))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", termSafe(t.Topic), t.PublishedLastHour, last, state)
	}
	tw.Flush()
}
