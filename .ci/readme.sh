#!/usr/bin/env bash
# The README's shell blocks, as written. A block marked in README.md with
#   <!-- ci: NAME -->
# right above its ```sh fence is printed by `readme.sh block NAME`, and run by
# `readme.sh run NAME EXPECT [PORTS]`: in a bash with job control, its
# output to a log, until EXPECT (a fixed string, which README.md must show
# too) appears in the log (at most 60 s), then its background jobs are
# stopped (SIGTERM, SIGKILL after 10 s). PORTS (comma-separated) must be free
# before it starts. It exits 1 when EXPECT never appears, a foreground
# command of the block fails or a port is taken, and prints the log.
set -euo pipefail

cd "$(dirname "$0")/.."

block() {
	awk -v marker="<!-- ci: $1 -->" '
		$0 == marker { armed = 1; next }
		armed && /^```sh$/ { inside = 1; next }
		inside && /^```$/ { exit }
		inside { print }
		armed && !inside && NF { exit }
	' README.md
}

# stop_jobs stops the background jobs of the calling shell: SIGTERM, then
# SIGKILL for any still running after 10 s.
stop_jobs() {
	local pids
	pids="$(jobs -pr)"
	[ -z "$pids" ] && return 0
	kill $pids 2>/dev/null || true
	for _ in $(seq 1 20); do
		[ -z "$(jobs -pr)" ] && break
		sleep 0.5
	done
	pids="$(jobs -pr)"
	[ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
	wait 2>/dev/null || true
}

# port_free reports whether nothing listens on 127.0.0.1:$1.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

run() {
	local name=$1 expect=$2 ports=${3:-} code log port
	code="$(block "$name")"
	if [ -z "$code" ]; then
		echo "error: README.md has no sh block marked <!-- ci: $name -->" >&2
		exit 1
	fi
	if ! grep -qF -- "$expect" README.md; then
		echo "error: README.md no longer shows '$expect', which its block '$name' must print" >&2
		exit 1
	fi
	for port in ${ports//,/ }; do
		if ! port_free "$port"; then
			echo "error: port $port is taken; the README's block '$name' needs it free" >&2
			exit 1
		fi
	done
	log="$(mktemp)"
	set +e
	(
		set -em
		trap stop_jobs EXIT
		trap 'exit 1' INT TERM
		eval "$code"
		for _ in $(seq 1 120); do
			grep -qF -- "$expect" "$log" && break
			sleep 0.5
		done
	) >"$log" 2>&1
	local rc=$?
	set -e
	cat "$log"
	if [ "$rc" -ne 0 ] || ! grep -qF -- "$expect" "$log"; then
		echo "error: the README's block '$name' did not show '$expect' (exit status $rc)" >&2
		exit 1
	fi
	echo "==> the README's block '$name' showed '$expect'"
}

case "${1:-}" in
block) block "$2" ;;
run) run "$2" "$3" "${4:-}" ;;
*)
	echo "usage: $0 block NAME | run NAME EXPECT [PORT,...]" >&2
	exit 2
	;;
esac
