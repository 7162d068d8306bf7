# Shared helpers for the shell end-to-end tests. Source it:
#   . "$(dirname "$0")/../lib.sh"
# meson treats exit 77 as "skipped". With AIRLOCK_MUST_WORK=1 (CI) a test
# that cannot run fails instead of skipping, so a broken CI machine is never
# mistaken for a passing one.

set -euo pipefail

AIRLOCK=${AIRLOCK:-airlock}
TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SOURCE_ROOT=$(cd "$TESTS_DIR/.." && pwd)

skip() {
	if [ "${AIRLOCK_MUST_WORK:-0}" = 1 ]; then
		echo "FAIL (cannot run, and AIRLOCK_MUST_WORK=1): $*" >&2
		exit 1
	fi
	echo "SKIP: $*" >&2
	exit 77
}

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

need_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (creates network namespaces)"
}

need_prog() {
	local p
	for p in "$@"; do
		command -v "$p" >/dev/null 2>&1 || skip "$p is not installed (scripts/setup.sh installs it)"
	done
}

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
	[ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
}

# expect_match WHAT REGEX TEXT
expect_match() {
	# A here-string, not a pipe: grep -q exiting early must not trip
	# pipefail on long text.
	grep -Eq -- "$2" <<<"$3" || fail "$1: '$3' does not match /$2/"
}

# A scratch directory removed when the test exits, readable by the
# unprivileged test user.
scratch_dir() {
	SCRATCH=$(mktemp -d /tmp/airlock-test.XXXXXX)
	chmod 755 "$SCRATCH"
	trap 'rm -rf "$SCRATCH"' EXIT
}
