#!/usr/bin/env bash
# PgBouncer in transaction pooling mode in front of the test database, for
# the tests that run the outbox behind a connection pooler
# (internal/e2e/pgbouncer_test.go, TEST_PGBOUNCER_URL).
#
#   .ci/pgbouncer.sh start    install (Debian, as root) if missing, write the
#                             config, start, wait until it answers; exits 1
#                             if it cannot
#   .ci/pgbouncer.sh stop     stop the PgBouncer this script started
#   .ci/pgbouncer.sh status   exit 0 if it answers
#
# It listens on 127.0.0.1:$PGBOUNCER_PORT (6432) and pools the database
# "test" of the PostgreSQL server at
# $PGBOUNCER_UPSTREAM_HOST:$PGBOUNCER_UPSTREAM_PORT (127.0.0.1:5432) as user
# postgres, trust auth.
# Its config, log and pid file live in $PGBOUNCER_DIR
# (/tmp/outbox-pgbouncer-<uid>). PgBouncer refuses to run as root, so under
# root it runs as the user postgres. A restart of PostgreSQL does not need a
# restart of PgBouncer: it opens new server connections by itself.
set -euo pipefail

PORT="${PGBOUNCER_PORT:-6432}"
UPSTREAM_HOST="${PGBOUNCER_UPSTREAM_HOST:-127.0.0.1}"
UPSTREAM_PORT="${PGBOUNCER_UPSTREAM_PORT:-5432}"
DIR="${PGBOUNCER_DIR:-/tmp/outbox-pgbouncer-$(id -u)}"
RUN_AS=postgres

answers() {
	psql "postgres://postgres@127.0.0.1:$PORT/test?sslmode=disable&connect_timeout=2" \
		-tAc 'SELECT 1' >/dev/null 2>&1
}

install() {
	if command -v pgbouncer >/dev/null 2>&1; then
		return
	fi
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "error: pgbouncer not found; install it (Debian: apt-get install pgbouncer)" >&2
		exit 1
	fi
	echo "installing pgbouncer"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
}

# write_config writes pgbouncer.ini and the user list into $DIR.
#
# pool_mode = transaction: a server connection belongs to a client for one
# transaction only, so nothing session-level (named prepared statements,
# SET, LISTEN, session advisory locks) survives from one transaction to the
# next. ignore_startup_parameters: startup parameters PgBouncer 1.18 does
# not track make it refuse the connection; clients such as JDBC send
# extra_float_digits. pgx sends application_name (when set), which
# PgBouncer tracks, and what else the URL adds.
write_config() {
	mkdir -p "$DIR"
	cat >"$DIR/userlist.txt" <<-EOF
		"postgres" ""
	EOF
	cat >"$DIR/pgbouncer.ini" <<-EOF
		[databases]
		test = host=$UPSTREAM_HOST port=$UPSTREAM_PORT dbname=test user=postgres

		[pgbouncer]
		listen_addr = 127.0.0.1
		listen_port = $PORT
		unix_socket_dir =
		auth_type = trust
		auth_file = $DIR/userlist.txt
		pool_mode = transaction
		max_client_conn = 1000
		default_pool_size = 20
		ignore_startup_parameters = extra_float_digits
		log_connections = 0
		log_disconnections = 0
		logfile = $DIR/pgbouncer.log
		pidfile = $DIR/pgbouncer.pid
	EOF
	if [ "$(id -u)" -eq 0 ]; then
		chown -R "$RUN_AS" "$DIR"
	fi
}

start() {
	if answers; then
		echo "PgBouncer answers on 127.0.0.1:$PORT"
		return
	fi
	install
	write_config
	rm -f "$DIR/pgbouncer.pid"
	local run=()
	if [ "$(id -u)" -eq 0 ]; then
		run=(runuser -u "$RUN_AS" --)
	fi
	if ! "${run[@]}" pgbouncer -d "$DIR/pgbouncer.ini"; then
		fail "PgBouncer did not start"
	fi
	for _ in $(seq 1 30); do
		if answers; then
			echo "PgBouncer answers on 127.0.0.1:$PORT (transaction pooling, database test -> $UPSTREAM_HOST:$UPSTREAM_PORT; log $DIR/pgbouncer.log)"
			return
		fi
		sleep 1
	done
	fail "PgBouncer does not answer on 127.0.0.1:$PORT after 30 s"
}

# fail reports why PgBouncer is not there, with the end of its log, and
# exits 1.
fail() {
	echo "error: $1; the end of its log ($DIR/pgbouncer.log):" >&2
	tail -n 20 "$DIR/pgbouncer.log" >&2 || true
	exit 1
}

stop() {
	if [ ! -f "$DIR/pgbouncer.pid" ]; then
		echo "no $DIR/pgbouncer.pid: PgBouncer was not started by this script"
		return
	fi
	kill "$(cat "$DIR/pgbouncer.pid")" 2>/dev/null || true
	rm -f "$DIR/pgbouncer.pid"
	echo "PgBouncer stopped"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status)
	if answers; then
		echo "PgBouncer answers on 127.0.0.1:$PORT"
	else
		echo "PgBouncer does not answer on 127.0.0.1:$PORT" >&2
		exit 1
	fi
	;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac
