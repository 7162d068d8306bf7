#!/usr/bin/env bash
# The logger in a real run, in the lab (elog/logger.h): the supervisor
# holds no descriptor of the egress log, a child "airlock-logger" does,
# and the run's log verifies. Killing the logger mid-run fails the run
# closed: the next connection is refused (pypi.org's server sees only the
# one made before), the run exits 125 and says the logger has gone. As
# root and, when AIRLOCK_TEST_USER is set, as that user.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

mkdir -p "$LAB_WORK/bin" "$LAB_WORK/policies"
install -m 755 "$AIRLOCK" "$LAB_WORK/bin/airlock"
AIRLOCK=$LAB_WORK/bin/airlock
cp "$SOURCE_ROOT/policies/pypi.yaml" "$LAB_WORK/policies/"
POL=$LAB_WORK/policies/pypi.yaml
access() { grep -c . "$LAB_LOG/pypi.org.access.log" 2>/dev/null || true; }

# The run's supervisor: the airlock process whose command line names this
# log (pids of processes this test started, found in /proc).
supervisor_of() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = airlock ] || continue
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "--log $1" || continue
		echo "${p#/proc/}"
		return 0
	done
	return 1
}
logger_of() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = airlock-logger ] || continue
		[ "$(awk '{print $4}' "$p/stat" 2>/dev/null)" = "$1" ] || continue
		echo "${p#/proc/}"
		return 0
	done
	return 1
}
# Does pid hold a descriptor of file?
holds() {
	local fd
	for fd in /proc/"$1"/fd/*; do
		[ "$(readlink "$fd" 2>/dev/null)" = "$2" ] && return 0
	done
	return 1
}

# A failure while the run waits: let it finish first (it would wait for
# "go" until the test's timeout), then fail.
fail_run() {
	touch "$LAB_WORK/go"
	wait "$bg" || true
	fail "$@"
}

one_role() {
	local role=$1 log=$LAB_WORK/logger-$1.jsonl err=$LAB_WORK/logger-$1.err sup lg rc before
	LOGF=$log
	rm -f "$log" "$err" "$LAB_WORK/go"
	touch "$log"
	[ "$role" = user ] && chown "$AIRLOCK_TEST_USER:" "$log"
	before=$(access)
	local client='curl -sS -o /dev/null https://pypi.org/simple/ && echo first-ok >&2;
		while [ ! -e go ]; do sleep 0.1; done;
		curl -sS -o /dev/null --max-time 5 https://pypi.org/simple/ && echo second-ok >&2; true'
	set +e
	if [ "$role" = user ]; then
		airlock_lab_as "$AIRLOCK_TEST_USER" "$POL" -- sh -c "$client" 2>"$err" &
	else
		airlock_lab "$POL" -- sh -c "$client" 2>"$err" &
	fi
	bg=$!
	set -e
	for _ in $(seq 100); do grep -q first-ok "$err" && break; sleep 0.1; done
	grep -q first-ok "$err" || fail_run "$role: the first connection failed: $(cat "$err")"
	sup=$(supervisor_of "$log") || fail_run "$role: no supervisor found"
	lg=$(logger_of "$sup") || fail_run "$role: the supervisor $sup has no airlock-logger child"
	holds "$sup" "$log" && fail_run "$role: the supervisor $sup holds the egress log's fd"
	holds "$lg" "$log" || fail_run "$role: the logger $lg does not hold the egress log's fd"
	grep -q '^CapEff:.0000000000000000$' /proc/"$lg"/status || fail_run "$role: the logger has capabilities: $(grep Cap /proc/"$lg"/status)"
	grep -q '^Seccomp:.2$' /proc/"$lg"/status || fail_run "$role: the logger has no seccomp filter"
	grep -q '^NoNewPrivs:.1$' /proc/"$lg"/status || fail_run "$role: the logger lacks no_new_privs"
	# The first connection's line is in, and chained.
	grep -q '"kind":"connect".*"seq":1,' "$log" || fail_run "$role: the first connection's line: $(cat "$log")"
	kill -KILL "$lg"
	touch "$LAB_WORK/go"
	set +e
	wait "$bg"
	rc=$?
	set -e
	rm -f "$LAB_WORK/go"
	expect_eq "$role: exit after the logger was killed" 125 "$rc"
	grep -q 'second-ok' "$err" && fail "$role: a connection went through after the logger was killed"
	grep -q 'the logger has gone' "$err" || fail "$role: no word of the logger: $(cat "$err")"
	expect_eq "$role: pypi.org requests: only the logged one" "$((before + 1))" "$(access)"
	# What was written before holds (the chain ends without task-end).
	"$AIRLOCK" log verify "$log" >/dev/null || fail "$role: the log does not verify: $("$AIRLOCK" log verify "$log")"
	echo "$role: logger alone holds the log; killing it fails the run closed"
}

one_role self
if [ -n "${AIRLOCK_TEST_USER:-}" ] && [ "$(id -u)" -eq 0 ]; then
	one_role user
fi
echo "logger e2e: ok"
