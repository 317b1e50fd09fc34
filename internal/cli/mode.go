package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func newModeCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "mode",
		GroupID: "database",
		Short:   "Show the relay mode of the outbox (claim, cursor or cdc), or switch it",
		Long: `The outbox records its relay mode in one row (the table outbox_relay_mode):

  claim   every relay claims messages and marks each one SENT; any number
          of relays share the work (the mode of a new outbox)
  cursor  new messages are QUEUED; one relay, the leader, reads them in
          seq order and saves its place (see 'outbox cursor')
  cdc     one relay reads the inserts from the WAL through a logical
          replication slot, which it creates at start (see docs/cdc.md)

'outbox mode' prints the mode, since when, and who switched it; 'outbox
stats', the status page, the metric outbox_relay_mode and 'outbox cursor
status' report the same. 'outbox relay' without --mode runs the mode
recorded here, and a relay started with another --mode refuses to start.

'outbox mode set MODE' switches, with the steps the pair of modes needs, in
one transaction. It refuses, saying what to do, when the switch needs the
relays stopped: out of cursor mode while a relay leads the cursor, out of
CDC mode while a CDC relay streams from its slot. Leaving CDC mode drops
the CDC relay's slot and publication. Nothing unsent is lost and order per
aggregate holds across every switch; see docs/cdc.md, "Switching modes".`,
		Example: `  outbox mode
  outbox mode --json
  outbox mode set cursor
  outbox mode set cdc --actor alice`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, pool, err := a.openStore(cmd.Context(), "mode", 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			m, err := st.Mode(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, newModeJSON(st.Schema(), m))
			}
			printMode(a.stdout, st.Schema(), m, time.Now())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.AddCommand(newModeSetCommand(a))
	return cmd
}

func newModeSetCommand(a *app) *cobra.Command {
	var actor string
	cmd := &cobra.Command{
		Use:   "set claim|cursor|cdc",
		Short: "Switch the outbox to another relay mode",
		Long: `set switches the outbox in --schema to the mode named, and records when
and who (--actor). It is idempotent.

  into cursor   messages enqueued from now on are QUEUED; relays in claim
                mode follow within a few seconds
  out of cursor the unsent QUEUED messages become PENDING; refused while a
                relay leads the cursor: stop the relays first
  into cdc      permits the CDC relay, which creates its slot at start and
                sends what is unsent through its table path (needs
                wal_level = logical); restart the relays without --mode
  out of cdc    drops the CDC relay's slot and publication (PostgreSQL
                stops keeping WAL for it); refused while a CDC relay
                streams: stop the CDC relays, standbys included, first

It exits 1, with the reason, when it refuses; nothing changes then.`,
		Example: `  outbox mode set cursor
  outbox mode set claim --actor alice`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &usageError{fmt.Errorf("%s needs one mode: claim, cursor or cdc", cmd.CommandPath())}
			}
			if _, err := pgstore.ParseMode(args[0]); err != nil {
				return &usageError{fmt.Errorf("%s %q: the mode must be claim, cursor or cdc", cmd.CommandPath(), args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			st, pool, err := a.openStore(cmd.Context(), "mode set", 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			if actor == "" {
				actor = ops.DefaultActor()
			}
			sw, err := st.SetMode(cmd.Context(), pgstore.Mode(args[0]), actor)
			if err != nil {
				return err
			}
			if sw.From == sw.To {
				m, err := st.Mode(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "the outbox in schema %s is already in %s mode\n", st.Schema(), sw.To)
				printMode(a.stdout, st.Schema(), m, time.Now())
				return nil
			}
			printSwitch(a.stdout, st.Schema(), sw)
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "", "who switches, recorded with the mode (default $USER@hostname)")
	return cmd
}

// printMode writes the mode, since when and who switched it.
func printMode(w io.Writer, schema string, m pgstore.ModeState, now time.Time) {
	fmt.Fprintf(w, "Schema:   %s\n", schema)
	fmt.Fprintf(w, "Mode:     %s\n", m.Mode)
	if !m.Recorded {
		fmt.Fprintln(w, "          (derived: the outbox lacks migration 017, which records the mode; run 'outbox migrate')")
		return
	}
	fmt.Fprintf(w, "Since:    %s (%s ago)\n", m.Since.UTC().Format(time.RFC3339), max(now.Sub(m.Since), 0).Round(time.Second))
	fmt.Fprintf(w, "By:       %s\n", termSafe(m.By))
}

// printSwitch says what a switch did and what to do next.
func printSwitch(w io.Writer, schema string, sw pgstore.ModeSwitch) {
	fmt.Fprintf(w, "the outbox in schema %s switched from %s to %s mode\n", schema, sw.From, sw.To)
	switch sw.From {
	case pgstore.ModeCursor:
		fmt.Fprintf(w, "%d unsent QUEUED message(s) moved to PENDING; the cursor's position stays, so QUEUED messages at or below it count as SENT\n", sw.Requeued)
	case pgstore.ModeCDC:
		if len(sw.DroppedSlots) > 0 {
			fmt.Fprintf(w, "dropped the CDC relay's replication slot(s) %s and publication(s)\n", strings.Join(sw.DroppedSlots, ", "))
		}
	}
	switch sw.To {
	case pgstore.ModeCursor:
		fmt.Fprintln(w, "messages enqueued from now on are QUEUED; relays in claim mode follow within a few seconds ('outbox cursor status' shows the leader)")
	case pgstore.ModeCDC:
		fmt.Fprintln(w, "restart the relays without --mode (or with --mode cdc): the CDC relay creates its slot and sends what is unsent through its table path; relays still claiming meanwhile are safe")
	case pgstore.ModeClaim:
		fmt.Fprintln(w, "start the relays ('outbox relay'): they claim what is unsent, in order per aggregate")
	}
}

// modeJSON is the JSON form of pgstore.ModeState.
type modeJSON struct {
	Schema   string     `json:"schema"`
	Mode     ops.Mode   `json:"mode"`
	Since    *time.Time `json:"since"`
	By       string     `json:"by"`
	Recorded bool       `json:"recorded"`
}

func newModeJSON(schema string, m pgstore.ModeState) modeJSON {
	return modeJSON{Schema: schema, Mode: m.Mode, Since: timePtr(m.Since), By: m.By, Recorded: m.Recorded}
}
