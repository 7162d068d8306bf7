#!/usr/bin/env bash
# The logger's confinement from inside it (tests/elog/logger_probe.c): once
# confined, openat, socket and execve each fail with ENOSYS, as root and
# rootless (AIRLOCK_TEST_USER), and its line is still written.
. "$(dirname "$0")/../lib.sh"
PROBE=${LOGGER_PROBE:?}
"$PROBE" || fail "as $(id -un): the logger's probe"
if [ "$(id -u)" -eq 0 ]; then
	[ -n "${AIRLOCK_TEST_USER:-}" ] || skip "rootless half: set AIRLOCK_TEST_USER"
	id "$AIRLOCK_TEST_USER" >/dev/null 2>&1 || fail "AIRLOCK_TEST_USER=$AIRLOCK_TEST_USER does not exist"
	setpriv --reuid="$AIRLOCK_TEST_USER" --regid="$AIRLOCK_TEST_USER" --init-groups "$PROBE" ||
		fail "as $AIRLOCK_TEST_USER: the logger's probe"
fi
echo "logger probe: ok"
