package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/store/pgstore"
)

func newMigrateCommand(a *app) *cobra.Command {
	var list bool
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
same time wait for each other. It prints the versions now in place.

With --list it only prints the migrations this binary carries, without
connecting to the database.`,
		Example: `  outbox migrate --database-url postgres://app@localhost:5432/app
  OUTBOX_DATABASE_URL=postgres://app@db/app OUTBOX_SCHEMA=events outbox migrate
  outbox migrate --list`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list {
				printMigrations(a.stdout, pgstore.Migrations())
				return nil
			}
			st, pool, err := a.openStore(cmd.Context(), "migrate", 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := st.Migrate(cmd.Context()); err != nil {
				return fmt.Errorf("migrate schema %s: %w", st.Schema(), err)
			}
			migs := pgstore.Migrations()
			a.logger.Info("migrations applied", "schema", st.Schema(), "database", RedactURL(a.databaseURL), "migrations", len(migs))
			fmt.Fprintf(a.stdout, "schema %s is up to date; applied migrations:\n", st.Schema())
			printMigrations(a.stdout, migs)
			return nil
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "print the migrations this binary carries and exit, without connecting")
	return cmd
}

// printMigrations writes one line per migration: version and name.
func printMigrations(w io.Writer, migs []pgstore.Migration) {
	for _, m := range migs {
		fmt.Fprintf(w, "  %03d %s\n", m.Version, m.Name)
	}
}
