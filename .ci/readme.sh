#!/usr/bin/env bash
# The README's shell blocks, as written. A block marked in README.md with
#   <!-- ci: NAME -->
# right above its ```sh fence is printed by `readme.sh block NAME`, and run by
# `readme.sh run NAME EXPECT`: in a bash with job control, its output to a
# log, until EXPECT (a fixed string) appears in the log (at most 60 s), then
# its background jobs are stopped. It exits 1 when EXPECT never appears or a
# foreground command of the block fails, and prints the log.
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

run() {
	local name=$1 expect=$2 code log
	code="$(block "$name")"
	if [ -z "$code" ]; then
		echo "error: README.md has no sh block marked <!-- ci: $name -->" >&2
		exit 1
	fi
	log="$(mktemp)"
	set +e
	(
		set -em
		trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
		eval "$code"
		for _ in $(seq 1 120); do
			grep -qF -- "$expect" "$log" && break
			sleep 0.5
		done
		kill $(jobs -p) 2>/dev/null || true
		wait || true
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
run) run "$2" "$3" ;;
*)
	echo "usage: $0 block NAME | run NAME EXPECT" >&2
	exit 2
	;;
esac
