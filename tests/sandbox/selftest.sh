#!/usr/bin/env bash
# airlock selftest: every check passes here, one line each, exit 0.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv
sbx_setup

for role in $ROLES; do
	rc=0
	out=$(cd / && as "$role" "$SCRATCH/airlock" selftest) || rc=$?
	expect_eq "$role: selftest exit" 0 "$rc"
	expect_eq "$role: nine checks" 9 "$(grep -c '^ok   ' <<<"$out")"
	grep -q '^ok   user namespace$' <<<"$out" || fail "$role: no user namespace line: $out"
	grep -q '^ok   seccomp filter$' <<<"$out" || fail "$role: no seccomp line: $out"
	out=$(cd / && as "$role" "$SCRATCH/airlock" selftest --root) || fail "$role: selftest --root: $out"
	expect_eq "$role: --root: nine checks" 9 "$(grep -c '^ok   ' <<<"$out")"
	expect_eq "$role: selftest with a command" 2 "$(status_of as "$role" "$SCRATCH/airlock" selftest true 2>/dev/null)"
done
echo "ok: selftest ($ROLES)"
