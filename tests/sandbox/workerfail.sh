#!/usr/bin/env bash
# Fail closed after the go: CMD is started before the worker has confined
# itself (its traffic waits in the listeners' queues), so a worker that
# cannot confine itself must end the run -- CMD killed at once, exit 125, a
# line that says why, task-end in the log, nothing left behind. The
# worker's mount view is made to fail by an LD_PRELOAD shim
# (failworker.c).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog pgrep
sbx_setup
[ -n "${FAILWORKER:-}" ] && [ -f "$FAILWORKER" ] || skip "FAILWORKER shim not built"
[ -n "${SUBREAPER:-}" ] && [ -x "$SUBREAPER" ] || skip "SUBREAPER not built"
cp "$FAILWORKER" "$SCRATCH/failworker.so"
cp "$SUBREAPER" "$SCRATCH/subreaper"
chmod 755 "$SCRATCH/failworker.so" "$SCRATCH/subreaper"

for role in $ROLES; do
	: >"$(logf "$role")"
	[ "$role" = user ] && chown "$AIRLOCK_TEST_USER:" "$(logf "$role")"
	t0=$(date +%s%N)
	rc=$(LD_PRELOAD="$SCRATCH/failworker.so" AL_WRAP="$SCRATCH/subreaper" \
		status_of al "$role" -- sleep 4242 2>"$SCRATCH/err-$role")
	ms=$((($(date +%s%N) - t0) / 1000000))
	err=$(cat "$SCRATCH/err-$role")
	echo "$err" >&2
	expect_eq "$role: exit status" 125 "$rc"
	expect_match "$role: the worker's reason" "worker: mount view: tmpfs: Operation not permitted" "$err"
	expect_match "$role: the run's end" "the worker could not confine itself" "$err"
	[ "$ms" -lt 3000 ] || fail "$role: CMD was not killed: the run took $ms ms"
	[ -z "$(pgrep -f 'sleep 4242' || true)" ] || fail "$role: CMD is still running"
	expect_match "$role: task-end" '"kind":"task-end".*"exit_status":125' "$(tail -n 1 "$(logf "$role")")"
	echo "ok ($role): exit $rc in $ms ms"
done
