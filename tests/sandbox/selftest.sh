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
	# Whether --ids range can work for this caller, said either way.
	grep -Eq '^note ids range: (available \(uid map [0-9 ,]+(, through newuidmap)?\)|unavailable \(.+\))$' <<<"$out" ||
		fail "$role: no ids range line: $out"
	[ "$role" != self ] || [ "$(id -u)" != 0 ] ||
		grep -qx 'note ids range: available (uid map 0 0 65536)' <<<"$out" || fail "root: ids range: $out"
	out=$(cd / && as "$role" "$SCRATCH/airlock" selftest --root) || fail "$role: selftest --root: $out"
	expect_eq "$role: --root: nine checks" 9 "$(grep -c '^ok   ' <<<"$out")"
	expect_eq "$role: selftest with a command" 2 "$(status_of as "$role" "$SCRATCH/airlock" selftest true 2>/dev/null)"
done
# A check that fails: the DNS listener cannot bind (an LD_PRELOAD shim
# says the port is taken). airlock must refuse to run CMD, say why, exit
# 125 and record the failure in task-start; selftest prints FAIL and skips
# what it could not check.
if [ -n "${FAILBIND:-}" ] && [ -f "$FAILBIND" ]; then
	cp "$FAILBIND" "$SCRATCH/failbind.so"
	chmod 755 "$SCRATCH/failbind.so"
	# A sanitizer build's runtime need not come first for this shim.
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
	for role in $ROLES; do
		rm -f "$(logf "$role")"
		rc=0
		out=$(LD_PRELOAD="$SCRATCH/failbind.so" al "$role" -- echo CMD-RAN 2>&1) || rc=$?
		expect_eq "$role: failed self-test exit" 125 "$rc"
		case "$out" in *CMD-RAN*) fail "$role: CMD ran although the self-test failed" ;; esac
		expect_match "$role: reason" "airlock: self-test failed, refusing to run the command: listeners held by the supervisor: bind: listener DNS udp 127.0.0.1:53: Address already in use" "$out"
		expect_match "$role: task-start selftest" '"selftest":"listeners held by the supervisor: bind: listener DNS udp' "$(grep task-start "$(logf "$role")")"
		expect_match "$role: task-end 125" '"kind":"task-end","exit_status":125' "$(grep task-end "$(logf "$role")")"
		rc=0
		out=$(cd / && LD_PRELOAD="$SCRATCH/failbind.so" as "$role" "$SCRATCH/airlock" selftest) || rc=$?
		expect_eq "$role: selftest exit on failure" 1 "$rc"
		expect_match "$role: FAIL line" "^FAIL listeners held by the supervisor: bind: listener DNS udp" "$(grep '^FAIL' <<<"$out")"
		expect_eq "$role: checks skipped after the failure" 5 "$(grep -c '^skip ' <<<"$out")"
	done
else
	skip "FAILBIND shim not built"
fi
echo "ok: selftest ($ROLES)"
