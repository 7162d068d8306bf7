#!/usr/bin/env bash
# DNS over TCP under clients that trickle (docs/dns.md, TCP), through
# `airlock run` in the test lab (tests/lab): 80 connections that send one
# byte every 2 s and never complete a query do not hold the listener's 64
# connections against a client that asks properly, and each is closed once
# the idle time has passed since it connected, whatever bytes it sent.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

POL=$LAB_WORK/trickle.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: trickle-e2e
	allow:
	  - host: pypi.org
YAML

out=$(airlock_lab "$POL" -- "$LAB_PYTHON" "$(lab_script "$SOURCE_ROOT/tests/dns/trickle.py")" 127.0.0.1 53 \
	pypi.org 80 16 2>"$LAB_LOG/run.err") || fail "airlock run: $(tail -n 20 "$LAB_LOG/run.err")"
echo "trickle: $out"
field() { /usr/bin/python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))' "$1" "$2"; }
FAILS=()
[ "$(field "$out" normal)" = '["ok", "ok", "ok"]' ] ||
	FAILS+=("a normal query over TCP was locked out: $(field "$out" normal)")
[ "$(field "$out" trickle_open)" = 0 ] ||
	FAILS+=("$(field "$out" trickle_open) trickling connections were still open after 16 s")
# 10 s of idle time, from the connection's start: no complete query came.
after=$(field "$out" closed_after_s)
/usr/bin/python3 -c 'import sys; sys.exit(float(sys.argv[1]) > 12.5)' "$after" ||
	FAILS+=("a trickling connection lived ${after} s")
! grep -q Sanitizer "$LAB_LOG/run.err" || fail "sanitizer report: $(head -n 20 "$LAB_LOG/run.err")"
[ ${#FAILS[@]} -eq 0 ] || fail "$(printf '\n  %s' "${FAILS[@]}")"
expect_logged "the normal queries are logged" 'e.get("kind") == "dns" and e.get("host") == "pypi.org" and e.get("verdict") == "allow"'
echo "ok"
