package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/outbox-dev/outbox/ops"
)

// deadLetterGroupJSON is the JSON form of ops.DeadLetterGroup.
type deadLetterGroupJSON struct {
	Key         string    `json:"key"`
	ErrorClass  string    `json:"errorClass"`
	Topic       string    `json:"topic"`
	EventType   string    `json:"eventType"`
	Count       int64     `json:"count"`
	Aggregates  int64     `json:"aggregates"`
	FirstDeadAt time.Time `json:"firstDeadAt"`
	LastDeadAt  time.Time `json:"lastDeadAt"`
	LastError   string    `json:"lastError"`
}

// routedTopic is how the group table shows an empty topic.
const routedTopic = "(routed)"

// listGroups prints the dead letters that f selects, grouped by cause.
func (a *app) listGroups(ctx context.Context, o *ops.Ops, f ops.Filter, asJSON bool) error {
	groups, err := o.DeadLetterGroups(ctx, f)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]deadLetterGroupJSON, len(groups))
		for i, g := range groups {
			out[i] = deadLetterGroupJSON(g)
		}
		return writeJSON(a.stdout, out)
	}
	if len(groups) == 0 {
		fmt.Fprintln(a.stdout, "no dead letters")
		return nil
	}
	printGroups(a.stdout, groups)
	if f.Limit > 0 && len(groups) == f.Limit {
		fmt.Fprintf(a.stdout, "(the %d largest groups shown; use --limit 0 for all)\n", f.Limit)
	}
	return nil
}

func printGroups(w io.Writer, groups []ops.DeadLetterGroup) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tDEAD LETTERS\tAGGREGATES\tERROR CLASS\tTOPIC\tEVENT TYPE\tFIRST DEAD\tLAST DEAD")
	routed := false
	for _, g := range groups {
		topic := g.Topic
		if topic == "" {
			topic, routed = routedTopic, true
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", g.Key, g.Count, g.Aggregates, termSafe(g.ErrorClass), termSafe(topic), termSafe(g.EventType),
			g.FirstDeadAt.UTC().Format(time.RFC3339), g.LastDeadAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
	if routed {
		fmt.Fprintln(w, routedTopic+": the messages name no topic; the relay's routes chose one when publishing (groups use the stored topic)")
	}
	fmt.Fprintf(w, "Replay a group: outbox dlq replay --group %s --reason TEXT (or discard --group ... --reason TEXT);\n", groups[0].Key)
	fmt.Fprintln(w, "its messages: outbox dlq list --error-class ... --event-type ...; their errors: outbox dlq show SEQ, or --json")
}
