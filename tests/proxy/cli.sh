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

# Descriptors the caller passed reach none of the proxy's processes, and
# stdin and stdout are /dev/null in each, the confined proxy's too
# (docs/proxy.md, "Confinement").
printf 'version: 1\nname: none\ndescription: allows nothing\n' >"$SCRATCH/none.yaml"
echo "the caller's" >"$SCRATCH/given"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$AIRLOCK" proxy -p "$SCRATCH/none.yaml" --listen "127.0.0.1:$port" --log "$SCRATCH/log.jsonl" \
	9<"$SCRATCH/given" 7>>"$SCRATCH/given" </dev/zero >"$SCRATCH/out" 2>"$SCRATCH/err" &
proxy=$!
for _ in $(seq 200); do
	grep -q 'listening on' "$SCRATCH/err" 2>/dev/null && break
	sleep 0.05
done
grep -q 'listening on' "$SCRATCH/err" || { kill "$proxy"; fail "the proxy did not start: $(cat "$SCRATCH/err")"; }
for p in "$proxy" $(pgrep -P "$proxy"); do
	c=$(cat /proc/"$p"/comm)
	for f in /proc/"$p"/fd/*; do
		t=$(readlink "$f" || true)
		case "${f##*/} -> $t" in
		*given*) kill "$proxy"; fail "$c holds the caller's descriptor ${f##*/}" ;;
		[01]" -> /dev/null") ;;
		[01]" -> "*) kill "$proxy"; fail "$c: its fd ${f##*/} is $t, not /dev/null" ;;
		esac
	done
done
kill -TERM "$proxy"
wait "$proxy" || fail "the proxy exited $? on SIGTERM"
echo ok
