#!/usr/bin/env bash
# Fail closed on the egress log, for real in the lab: a log that cannot be
# written at the start stops the run before CMD gets any network, and a log
# piped to a reader that goes away mid-run makes the proxy refuse every later
# connection (pypi.org's server sees only the one made while the log worked).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../lab/lib.sh"
lab_start

access() { grep -c . "$LAB_LOG/pypi.org.access.log" 2>/dev/null || true; }

# 1. /dev/full: nothing runs, nothing leaves.
before=$(access)
LOGF=/dev/full
set +e
airlock_lab pypi -- curl -sS -o /dev/null https://pypi.org/simple/ 2>"$LAB_WORK/full.err"
rc=$?
set -e
expect_eq "run with an unwritable log: exit" 125 "$rc"
grep -q 'egress log' "$LAB_WORK/full.err" || fail "no egress-log error: $(cat "$LAB_WORK/full.err")"
expect_eq "pypi.org requests with an unwritable log" "$before" "$(access)"

# 2. The log's reader exits after the first event: the next connection is
#    refused, not let through unrecorded. The log goes to fd 3, a pipe of its
#    own (airlock refuses a log that is CMD's stdout or stderr).
before=$(access)
LOGF=/dev/fd/3
set +e
airlock_lab pypi -- sh -c 'curl -sS -o /dev/null https://pypi.org/simple/ && echo first-ok >&2;
	sleep 1; curl -sS -o /dev/null https://pypi.org/simple/ && echo second-ok >&2' \
	3>&1 >/dev/null 2>"$LAB_WORK/pipe.err" | head -n 2 >"$LAB_WORK/pipe.log"
set -e
grep -q '"kind":"connect"' "$LAB_WORK/pipe.log" || fail "the first connection was not logged: $(cat "$LAB_WORK/pipe.log")"
grep -q 'first-ok' "$LAB_WORK/pipe.err" || fail "the first connection failed: $(cat "$LAB_WORK/pipe.err")"
if grep -q 'second-ok' "$LAB_WORK/pipe.err"; then
	fail "a connection went through after the log's reader had gone"
fi
expect_eq "pypi.org requests: only the logged one" "$((before + 1))" "$(access)"
echo "fail closed: ok"
