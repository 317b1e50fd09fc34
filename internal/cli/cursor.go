package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func newCursorCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cursor",
		GroupID: "database",
		Short:   "Turn cursor mode on or off, or show the cursor",
		Long: `In cursor mode the relays do not claim and mark each message: new messages
are stored as QUEUED, and one relay at a time, the leader, reads them in
enqueue order, publishes them and saves its place (the position) in the
table outbox_cursor, every 100 ms while it moves. A QUEUED message counts
as SENT once the position passed it and as PENDING before; its row is
never changed when it is published. A message whose publish fails leaves
cursor mode: it becomes FAILED or DEAD_LETTER as in claim mode, and the
later messages of its aggregate follow it (PENDING), so retries, dead
letters, replay and discard work as before.

  enable    turn cursor mode on: messages enqueued from now on are QUEUED
  disable   turn it off: new messages are PENDING again, and the QUEUED
            messages above the position become PENDING (stop the relays
            first: it is refused while a relay leads the cursor)
  status    the mode, the position, when it was saved, the leader and its
            lease, and the lag (QUEUED messages above the position)

enable and disable are 'outbox mode set cursor' and 'outbox mode set claim'
(the same switch, recorded with the database role as who switched), except
that enable refuses an outbox in CDC mode and disable does nothing outside
cursor mode. Relays follow a switch by themselves within a few seconds;
writers need nothing. 'outbox stats', 'cleanup', 'replay' and the partition maintenance
count a QUEUED message as SENT or unsent by the position.`,
		Example: `  outbox cursor enable
  outbox cursor status
  outbox cursor status --json | jq .lagMessages
  outbox cursor disable`,
		Args: noArgs,
	}
	cmd.AddCommand(newCursorEnableCommand(a), newCursorDisableCommand(a), newCursorStatusCommand(a))
	return cmd
}

func newCursorEnableCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "enable",
		Short: "Turn cursor mode on",
		Long: `enable turns cursor mode on for the outbox in --schema: messages enqueued
from now on are QUEUED and published by the leading relay in seq order.
Messages already in the table stay with the claims as before, and order
per aggregate holds across the switch. It waits (at most five seconds) for
the transactions enqueueing at that moment. It is idempotent.

It is refused when 'outbox migrate' has not created outbox_cursor yet,
when the outbox is in CDC mode ('outbox mode set cursor' switches it), or
when the seq sequence caches values.`,
		Example: `  outbox cursor enable --schema outbox`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			o, st, closePool, err := a.openCursorTools(ctx, "cursor enable")
			if err != nil {
				return err
			}
			defer closePool()
			// Read before the switch, but let the switch report an outbox
			// it refuses (not migrated yet) first.
			before, beforeErr := o.Cursor(ctx)
			if err := st.EnableCursor(ctx); err != nil {
				return err
			}
			if beforeErr != nil {
				return beforeErr
			}
			after, err := o.Cursor(ctx)
			if err != nil {
				return err
			}
			if before.Mode == ops.ModeCursor {
				fmt.Fprintf(a.stdout, "cursor mode was already on in schema %s; position %d\n", o.Schema(), after.Position)
				return nil
			}
			fmt.Fprintf(a.stdout, "cursor mode is on in schema %s: messages enqueued from now on are QUEUED; the cursor starts at position %d\n",
				o.Schema(), after.Position)
			fmt.Fprintln(a.stdout, "relays follow within a few seconds; 'outbox cursor status' shows the leader and the lag")
			return nil
		},
	}
}

func newCursorDisableCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "disable",
		Short: "Turn cursor mode off (stop the relays first)",
		Long: `disable turns cursor mode off for the outbox in --schema: messages enqueued
from now on are PENDING and claimed as before, and the QUEUED messages the
cursor has not passed become PENDING; it prints how many. The cursor's row
stays, inactive, with its position, so that the QUEUED messages at or
below it still count as SENT. It is idempotent.

Stop the relays first: it is refused while a relay leads the cursor (that
relay may be publishing messages that would then be claimed too), naming
the relay and until when its lease runs. A relay that stops resigns its
lead at once; a killed one holds it until its lease expires.`,
		Example: `  outbox cursor disable --schema outbox`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			o, st, closePool, err := a.openCursorTools(ctx, "cursor disable")
			if err != nil {
				return err
			}
			defer closePool()
			before, beforeErr := o.Cursor(ctx)
			moved, err := st.DisableCursor(ctx)
			if err != nil {
				return err
			}
			if beforeErr != nil {
				return beforeErr
			}
			if before.Mode != ops.ModeCursor {
				fmt.Fprintf(a.stdout, "cursor mode was already off in schema %s\n", o.Schema())
				return nil
			}
			after, err := o.Cursor(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "cursor mode is off in schema %s: %d unsent QUEUED message(s) moved to PENDING for the claims\n",
				o.Schema(), moved)
			fmt.Fprintf(a.stdout, "the position %d stays: QUEUED messages at or below it count as SENT\n", after.Position)
			return nil
		},
	}
}

func newCursorStatusCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the mode, the cursor's position, leader, lease and lag",
		Long: `status prints the relay mode of the outbox in --schema (claim, cursor or
cdc, as 'outbox mode' shows it) and, once cursor mode was used, its cursor: the position (every QUEUED
message at or below it is sent), when the leader last saved it, which
relay leads and until when its lease runs, and the lag: the QUEUED
messages above the position and the age of the oldest. The leader saves
the position every 100 ms while it moves, so messages acknowledged since
count in the lag for that long.

With --json it prints one JSON object for scripts; durations are in
seconds.`,
		Example: `  outbox cursor status
  outbox cursor status --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, pool, err := a.openOps(cmd.Context(), "cursor status", ops.Config{})
			if err != nil {
				return err
			}
			defer pool.Close()
			c, err := o.Cursor(cmd.Context())
			if err != nil {
				return fmt.Errorf("read the cursor of schema %s: %w", o.Schema(), err)
			}
			if asJSON {
				return writeJSON(a.stdout, newCursorJSON(c))
			}
			printCursor(a.stdout, c)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

// openCursorTools connects to --database-url and returns the operations
// tools and the store of --schema, and a func that closes the pool.
func (a *app) openCursorTools(ctx context.Context, purpose string) (*ops.Ops, *pgstore.Store, func(), error) {
	o, pool, err := a.openOps(ctx, purpose, ops.Config{})
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := a.newStore(pool)
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return o, st, pool.Close, nil
}

// printCursor writes the mode and, if cursor mode was used, the cursor, in
// the layout of 'outbox stats'.
func printCursor(w io.Writer, c ops.CursorState) {
	fmt.Fprintf(w, "Mode:               %s", c.Mode)
	if !c.ModeSince.IsZero() {
		fmt.Fprintf(w, " (since %s, switched by %s)", c.ModeSince.UTC().Format(time.RFC3339), termSafe(c.ModeBy))
	}
	fmt.Fprintln(w)
	if !c.Present {
		return
	}
	if c.Mode != ops.ModeCursor {
		fmt.Fprintln(w, "                    (cursor mode was on; QUEUED messages at or below its position count as SENT)")
	}
	fmt.Fprintf(w, "Cursor position:    %d (saved %s ago, at %s)\n", c.Position,
		max(c.At.Sub(c.SavedAt), 0).Round(time.Millisecond), c.SavedAt.UTC().Format(time.RFC3339Nano))
	switch {
	case c.Leading:
		fmt.Fprintf(w, "Cursor leader:      %s (lease until %s)\n", termSafe(c.Leader), c.LeaseExpiresAt.UTC().Format(time.RFC3339Nano))
	case c.Leader != "":
		fmt.Fprintf(w, "Cursor leader:      none (%s's lease expired at %s)\n", termSafe(c.Leader), c.LeaseExpiresAt.UTC().Format(time.RFC3339Nano))
	default:
		fmt.Fprintln(w, "Cursor leader:      none")
	}
	if c.HandledHead > 0 {
		fmt.Fprintf(w, "Handled above it:   up to seq %d, but for %d range(s) read and not acknowledged or in a gap\n",
			c.HandledHead, c.UnhandledRanges)
	}
	if c.LagMessages == 0 {
		fmt.Fprintln(w, "Cursor lag:         0 messages")
	} else {
		fmt.Fprintf(w, "Cursor lag:         %d message(s), the oldest %s old (created %s)\n", c.LagMessages,
			c.LagAge.Round(time.Millisecond), c.OldestUnsentAt.UTC().Format(time.RFC3339))
	}
}

// cursorJSON is the JSON form of ops.CursorState.
type cursorJSON struct {
	At             time.Time  `json:"at"`
	Mode           ops.Mode   `json:"mode"`
	ModeSince      *time.Time `json:"modeSince"`
	ModeBy         string     `json:"modeBy"`
	Present        bool       `json:"present"`
	Position       int64      `json:"position"`
	SavedAt        *time.Time `json:"savedAt"`
	EnabledAt      *time.Time `json:"enabledAt"`
	Leader         string     `json:"leader"`
	Leading        bool       `json:"leading"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt"`
	// HandledHead and UnhandledRanges: see ops.CursorState (0: none).
	HandledHead     int64      `json:"handledHead"`
	UnhandledRanges int        `json:"unhandledRanges"`
	LagMessages     int64      `json:"lagMessages"`
	OldestUnsentAt  *time.Time `json:"oldestUnsentAt"`
	LagSeconds      float64    `json:"lagSeconds"`
}

func newCursorJSON(c ops.CursorState) cursorJSON {
	return cursorJSON{At: c.At, Mode: c.Mode, ModeSince: timePtr(c.ModeSince), ModeBy: c.ModeBy, Present: c.Present, Position: c.Position,
		SavedAt: timePtr(c.SavedAt), EnabledAt: timePtr(c.EnabledAt), Leader: c.Leader, Leading: c.Leading,
		LeaseExpiresAt: timePtr(c.LeaseExpiresAt), HandledHead: c.HandledHead, UnhandledRanges: c.UnhandledRanges,
		LagMessages:    c.LagMessages,
		OldestUnsentAt: timePtr(c.OldestUnsentAt), LagSeconds: c.LagAge.Seconds()}
}
