#!/usr/bin/env bash
# Fail closed after the go: CMD is started before the worker has confined
# itself (its traffic waits in the listeners' queues) and before the
# broker is forked, so a worker that cannot confine itself, a broker
# that cannot be forked, or one that forks and then exits (its
# confinement refused) must end the run -- CMD killed at once, exit 125,
# a line that says why, task-end in the log, nothing left behind. The
# failures come from LD_PRELOAD shims: the worker's mount view
# (failworker.c), the supervisor's third fork, the broker's (failfork.c),
# the broker's no_new_privs (failbroker.c).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog pgrep
sbx_setup
[ -n "${FAILWORKER:-}" ] && [ -f "$FAILWORKER" ] || skip "FAILWORKER shim not built"
[ -n "${FAILFORK:-}" ] && [ -f "$FAILFORK" ] || skip "FAILFORK shim not built"
[ -n "${FAILBROKER:-}" ] && [ -f "$FAILBROKER" ] || skip "FAILBROKER shim not built"
[ -n "${SUBREAPER:-}" ] && [ -x "$SUBREAPER" ] || skip "SUBREAPER not built"
cp "$FAILWORKER" "$SCRATCH/failworker.so"
cp "$FAILFORK" "$SCRATCH/failfork.so"
cp "$FAILBROKER" "$SCRATCH/failbroker.so"
cp "$SUBREAPER" "$SCRATCH/subreaper"
chmod 755 "$SCRATCH/failworker.so" "$SCRATCH/failfork.so" "$SCRATCH/failbroker.so" \
	"$SCRATCH/subreaper"
# A sanitizer build's runtime need not come first for this shim.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

# check ROLE WHAT REGEX...: the run just made (rc, ms, the role's stderr
# and log) ended as it must, its stderr matching each REGEX.
check() {
	local role=$1 what=$2 err why
	shift 2
	err=$(cat "$SCRATCH/err-$role")
	echo "$err" >&2
	expect_eq "$role, $what: exit status" 125 "$rc"
	for why in "$@"; do
		expect_match "$role, $what: the reason" "$why" "$err"
	done
	[ "$ms" -lt 3000 ] || fail "$role, $what: CMD was not killed: the run took $ms ms"
	[ -z "$(pgrep -f 'sleep 4242' || true)" ] || fail "$role, $what: CMD is still running"
	expect_match "$role, $what: task-end" '"kind":"task-end".*"exit_status":125' \
		"$(tail -n 1 "$(logf "$role")")"
	echo "ok ($role, $what): exit $rc in $ms ms"
}

for role in $ROLES; do
	: >"$(logf "$role")"
	[ "$role" = user ] && chown "$AIRLOCK_TEST_USER:" "$(logf "$role")"
	t0=$(date +%s%N)
	rc=$(LD_PRELOAD="$SCRATCH/failworker.so" AL_WRAP="$SCRATCH/subreaper" \
		status_of al "$role" -- sleep 4242 2>"$SCRATCH/err-$role")
	ms=$((($(date +%s%N) - t0) / 1000000))
	check "$role" "the worker" "worker: mount view: tmpfs: Operation not permitted" \
		"the worker could not confine itself"

	t0=$(date +%s%N)
	rc=$(LD_PRELOAD="$SCRATCH/failfork.so" FAILFORK_AT=3 AL_WRAP="$SCRATCH/subreaper" \
		status_of al "$role" -- sleep 4242 2>"$SCRATCH/err-$role")
	ms=$((($(date +%s%N) - t0) / 1000000))
	check "$role" "the broker" "broker: fork: Resource temporarily unavailable: ending the sandbox"

	t0=$(date +%s%N)
	rc=$(LD_PRELOAD="$SCRATCH/failbroker.so" AL_WRAP="$SCRATCH/subreaper" \
		status_of al "$role" -- sleep 4242 2>"$SCRATCH/err-$role")
	ms=$((($(date +%s%N) - t0) / 1000000))
	check "$role" "the broker's confinement" "no_new_privs: Operation not permitted" \
		"the broker exited: ending the sandbox"
done
