package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/store/pgstore"
)

func newMigrateCommand(a *app) *cobra.Command {
	var (
		list        bool
		partitioned bool
		interval    = 24 * time.Hour
		ahead       int
	)
	cmd := &cobra.Command{
		Use:     "migrate",
		GroupID: "database",
		Short:   "Create or update the outbox tables in PostgreSQL",
		Long: `migrate creates the schema given by --schema, if it is missing, and applies
every migration that it has not applied yet: the outbox table, its indexes
and the NOTIFY trigger that wakes the relay. The applied versions are
recorded in <schema>.outbox_migrations.

It is safe to run at every deploy: what is applied is skipped, all pending
migrations are applied in one transaction, and processes that run it at the
same time wait for each other. It says which migrations it applied, or
that the schema was already up to date, and prints the versions now in
place.

With --partitioned it then makes outbox_messages a table partitioned by
created_at, one partition per --partition-interval (1d by default; a whole
number of hours), and creates the default partition and the partitions up
to --partitions-ahead intervals ahead. A table with rows keeps them, as the
partition outbox_messages_legacy (its indexes are reused; the new primary
key is built on it, under a lock that stops writes while it builds: stop
the relays, and run 'outbox cleanup' first on a large table). Retention then
drops whole partitions: 'outbox cleanup --partitions', or the relay's
--cleanup-older-than. The change is one-way and the interval is fixed.

With --list it only prints the migrations this binary carries, without
connecting to the database.`,
		Example: `  outbox migrate --database-url postgres://app@localhost:5432/app
  OUTBOX_DATABASE_URL=postgres://app@db/app OUTBOX_SCHEMA=events outbox migrate
  outbox migrate --partitioned --partition-interval 1d
  outbox migrate --list`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list {
				printMigrations(a.stdout, pgstore.Migrations())
				return nil
			}
			switch {
			case !partitioned && (changed(cmd.Flags(), "partition-interval") || changed(cmd.Flags(), "partitions-ahead")):
				return flagError("partitioned", "is required with --partition-interval and --partitions-ahead")
			case partitioned && (interval < time.Hour || interval%time.Hour != 0):
				return flagError("partition-interval", "must be a whole number of hours, at least 1h, not %s", formatAge(interval))
			case ahead < 0:
				return flagError("partitions-ahead", "must not be negative, not %d", ahead)
			}
			st, pool, err := a.openStore(cmd.Context(), "migrate", 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			if partitioned {
				st, err = pgstore.New(pool, pgstore.Config{Schema: a.schema, Logger: a.logger,
					Partitioning: pgstore.Partitioning{Interval: interval, Ahead: ahead}})
				if err != nil {
					return err
				}
			}
			applied, err := st.ApplyMigrations(cmd.Context())
			if err != nil {
				return fmt.Errorf("migrate schema %s: %w", st.Schema(), err)
			}
			migs := pgstore.Migrations()
			a.logger.Info("migrations applied", "schema", st.Schema(), "database", RedactURL(a.databaseURL), "applied", len(applied))
			if len(applied) == 0 {
				fmt.Fprintf(a.stdout, "schema %s was already up to date (migrations %s)\n", st.Schema(), versionRanges(migs))
			} else {
				fmt.Fprintf(a.stdout, "applied migrations %s to schema %s\n", versionRanges(applied), st.Schema())
			}
			fmt.Fprintln(a.stdout, "migrations in place:")
			printMigrations(a.stdout, migs)
			if partitioned {
				ps, err := st.Partitions(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "outbox_messages is partitioned by %s; partitions:\n", formatAge(interval))
				printPartitions(a.stdout, ps)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "print the migrations this binary carries and exit, without connecting")
	cmd.Flags().BoolVar(&partitioned, "partitioned", false, "make outbox_messages a table partitioned by created_at (one-way; see above)")
	cmd.Flags().Var(ageValue{&interval}, "partition-interval", "time span of one partition (with --partitioned): 1d, 6h, ...")
	cmd.Flags().IntVar(&ahead, "partitions-ahead", pgstore.DefaultPartitionsAhead, "partitions to create after the current one (with --partitioned)")
	return cmd
}

// printPartitions writes one line per partition: name and range.
func printPartitions(w io.Writer, ps []pgstore.Partition) {
	for _, p := range ps {
		switch {
		case p.Default:
			fmt.Fprintf(w, "  %s (default: rows no other partition covers)\n", termSafe(p.Name))
		case p.From.IsZero():
			fmt.Fprintf(w, "  %s (before %s)\n", termSafe(p.Name), p.To.Format(time.RFC3339))
		default:
			fmt.Fprintf(w, "  %s [%s, %s)\n", termSafe(p.Name), p.From.Format(time.RFC3339), p.To.Format(time.RFC3339))
		}
	}
}

// printMigrations writes one line per migration: version and name.
func printMigrations(w io.Writer, migs []pgstore.Migration) {
	for _, m := range migs {
		fmt.Fprintf(w, "  %03d %s\n", m.Version, m.Name)
	}
}

// versionRanges writes the versions of migs, in order, with runs of
// consecutive versions as ranges: "001–012", "003, 005–007".
func versionRanges(migs []pgstore.Migration) string {
	var parts []string
	for i := 0; i < len(migs); {
		j := i
		for j+1 < len(migs) && migs[j+1].Version == migs[j].Version+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprintf("%03d", migs[i].Version))
		} else {
			parts = append(parts, fmt.Sprintf("%03d–%03d", migs[i].Version, migs[j].Version))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
