#!/bin/bash
# What each way of taking a message off the outbox costs PostgreSQL, per
# message, while writers commit at a fixed rate (docs/performance-history.md,
# "What a relay that writes per message costs").
#
# For each relay shape, a fresh schema from `outbox migrate`, then 8 pgbench
# writers at $RATE business transactions/s (writer.sql: one business row and
# one outbox row) for $SECONDS_PER_RUN s, while one pgbench client runs the
# shape in a loop (batches of up to 100, 20 ms apart, with
# synchronous_commit=off as the relay's statements have). It prints the CPU
# time of that client's backend process per message (utime+stime from
# /proc/PID/stat, so it must run on the database's machine) and the WAL the
# whole server wrote per transaction (pgbench's writers included: the read
# shape writes nothing, so its figure is the writers' own).
#
# Each shape is a pgbench script put together from the pieces here (lease.sql
# or lock.sql, then mark.sql or delete.sql, or read.sql alone, then a 20 ms
# sleep). They share a simplified claim (due rows in seq order from a floor,
# no ordering probe), so that they differ only in what they write:
#   lease_mark    the claim mode of today: the claim leases each row (an UPDATE
#                 of the lease columns, in place where the page has room) and
#                 the mark sets status SENT (a new row version, new index entries)
#   lock_mark     no lease: the rows are locked (FOR UPDATE SKIP LOCKED) in a
#                 transaction that marks them and commits
#   lease_delete  the lease, then DELETE instead of the mark
#   lock_delete   the lock, then DELETE
#   read          cursor mode: a plain SELECT from a position, nothing written
# and "hot" runs lease_mark and lock_mark on a schema whose indexes do not
# name status (the partial indexes replaced by full ones), so that the mark
# too can be an update in place.
#
# Usage: OUTBOX=/path/to/outbox DB=postgres://postgres@127.0.0.1:5432/hotexp ./run.sh [rounds]
# The database must exist; the script drops and creates schemas named x_*.
set -euo pipefail
cd "$(dirname "$0")"
OUTBOX=${OUTBOX:-outbox}
DB=${DB:-postgres://postgres@127.0.0.1:5432/hotexp}
RATE=${RATE:-1500}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-12}
ROUNDS=${1:-3}

schema() { # $1 schema, $2 real|hot
	psql -q "$DB" -c "DROP SCHEMA IF EXISTS $1 CASCADE" >/dev/null 2>&1
	"$OUTBOX" migrate --database-url "$DB" --schema "$1" >/dev/null 2>&1
	psql -q "$DB" <<-SQL
		CREATE TABLE $1.bench_orders (id uuid PRIMARY KEY, customer_id text NOT NULL,
		    amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
		ALTER TABLE $1.outbox_messages SET (autovacuum_enabled = false);
		ALTER TABLE $1.bench_orders SET (autovacuum_enabled = false);
	SQL
	if [ "$2" = hot ]; then
		psql -q "$DB" <<-SQL
			DROP INDEX $1.outbox_messages_due, $1.outbox_messages_unsent_by_aggregate,
			    $1.outbox_messages_sent, $1.outbox_messages_discarded;
			CREATE INDEX outbox_messages_due ON $1.outbox_messages (seq);
			CREATE INDEX outbox_messages_by_aggregate ON $1.outbox_messages (aggregate_type, aggregate_id, seq);
		SQL
	fi
}

# shape NAME: the pgbench script of a shape, in $work.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shape() {
	local f=$work/$1.sql
	case $1 in
	lease_mark) cat lease.sql mark.sql ;;
	lease_delete) cat lease.sql delete.sql ;;
	lock_mark) echo 'BEGIN;'; cat lock.sql mark.sql; echo 'COMMIT;' ;;
	lock_delete) echo 'BEGIN;'; cat lock.sql delete.sql; echo 'COMMIT;' ;;
	read) cat read.sql ;;
	esac >"$f"
	echo '\sleep 20 ms' >>"$f"
	echo "$f"
}

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
lsn() { psql -Atq "$DB" -c "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"; }

run() { # $1 name, $2 real|hot, $3 shape
	local s=x_$1
	schema "$s" "$2"
	PGAPPNAME=relay_writes PGOPTIONS="-c search_path=$s -c synchronous_commit=off" \
		pgbench -n -c 1 -T $((SECONDS_PER_RUN + 3)) -D floor=0 -f "$(shape "$3")" "$DB" >/dev/null 2>&1 &
	local relay=$!
	sleep 0.5
	local pid c0 c1 l0 l1 tx
	pid=$(psql -Atq "$DB" -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'relay_writes'")
	c0=$(cpu "$pid") l0=$(lsn)
	tx=$(PGOPTIONS="-c search_path=$s" pgbench -n -c 8 -j 2 -R "$RATE" -T "$SECONDS_PER_RUN" -f writer.sql "$DB" 2>&1 |
		awk '/actually processed/ {print $NF}')
	sleep 0.2
	c1=$(cpu "$pid") l1=$(lsn)
	wait "$relay"
	local st
	st=$(psql -Atq "$DB" -c "SELECT (SELECT count(*) FROM $s.outbox_messages WHERE status <> 'SENT') || ' unsent, ' ||
		n_tup_upd || ' updates, ' || n_tup_hot_upd || ' in place'
		FROM pg_stat_user_tables WHERE schemaname = '$s' AND relname = 'outbox_messages'")
	awk -v n="$1" -v hz="$(getconf CLK_TCK)" -v c=$((c1 - c0)) -v tx="$tx" -v wal=$((l1 - l0)) -v st="$st" 'BEGIN {
		printf "%-18s relay backend %5.1f us/msg   WAL %5.0f B/tx   %d tx   %s\n", n, c / hz * 1e6 / tx, wal / tx, tx, st }'
}

for _ in $(seq "$ROUNDS"); do
	run lease_mark real lease_mark
	run lock_mark real lock_mark
	run hot_lease_mark hot lease_mark
	run hot_lock_mark hot lock_mark
	run lease_delete real lease_delete
	run lock_delete real lock_delete
	run read real read
done
