#!/usr/bin/env bash
# `airlock proxy` argument handling and exit statuses (docs/proxy.md): no
# network, no privileges.
. "$(dirname "$0")/../lib.sh"
# lib.sh's expect_match pipes into grep -q, which under pipefail can fail
# when grep exits before printf has written a long reply; a here-string
# cannot.
expect_re() {
	grep -Eq -- "$2" <<<"$3" || fail "$1: '$3' does not match /$2/"
}
scratch_dir

out=$("$AIRLOCK" proxy --help) || fail "--help exits non-zero"
expect_re "--help" '^usage: airlock proxy -p POLICY --listen ADDR:PORT' "$out"

set +e
"$AIRLOCK" proxy >/dev/null 2>&1; expect_eq "no arguments" 2 $?
"$AIRLOCK" proxy -p none >/dev/null 2>&1; expect_eq "no --listen" 2 $?
"$AIRLOCK" proxy -p none --listen nope >/dev/null 2>&1; expect_eq "bad --listen" 2 $?
"$AIRLOCK" proxy -p none --listen 127.0.0.1:0 >/dev/null 2>&1; expect_eq "port 0" 2 $?
"$AIRLOCK" proxy -p none --listen 127.0.0.1:3128 --max-conns 0 >/dev/null 2>&1
expect_eq "--max-conns 0" 2 $?
printf 'version: 1\nallow:\n  - host: [bad\n' >"$SCRATCH/bad.yaml"
err=$("$AIRLOCK" proxy -p "$SCRATCH/bad.yaml" --listen 127.0.0.1:3128 2>&1 >/dev/null)
expect_eq "invalid policy" 1 $?
expect_re "invalid policy names the file" 'bad\.yaml:[0-9]+:[0-9]+' "$err"
set -e
echo ok
