#!/usr/bin/env bash
# One decision, one vocabulary (DESIGN.md, "One decision, one resolver";
# docs/log.md, "Reasons"): the same denied destination gets the same
# reason token however it is asked for: CONNECT through the explicit proxy,
# transparent TLS and HTTP, a DNS query, `airlock policy test` and
# `airlock log replay`. The names and ports that differ are in `detail`.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

POL=$LAB_WORK/reasons.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: reasons-e2e
	allow:
	  - host: pypi.org
	deny:
	  - host: upload.pypi.org
YAML

cat >"$LAB_WORK/inside.sh" <<-'SH'
	unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
	c() { curl -sS --max-time 5 -o /dev/null "$@" 2>/dev/null; }
	for h in evil.test upload.pypi.org; do
		c -x http://127.0.0.1:3128 -p "https://$h/"
		c --resolve "$h:443:203.0.113.66" "https://$h/"
		c --resolve "$h:80:203.0.113.66" "http://$h/"
		python3 -c 'import socket, sys
	try:
	    socket.getaddrinfo(sys.argv[1], 443, socket.AF_INET)
	except OSError:
	    pass' "$h"
	done
	echo inside-done
SH
out=$(airlock_lab "$POL" -- sh "$LAB_WORK/inside.sh" 2>&1) || true
! grep -q Sanitizer <<<"$out" || fail "sanitizer report: $out"
grep -qx inside-done <<<"$out" || fail "the commands inside did not run: $out"

# The reason tokens each way of asking got, from the log: "kind=reason".
tokens() {
	/usr/bin/python3 - "$LOGF" "$1" <<-'EOF'
		import json, sys
		seen = set()
		for line in open(sys.argv[1]):
		    e = json.loads(line)
		    if e.get("host") == sys.argv[2] and e.get("verdict") == "deny":
		        seen.add(f'{e["kind"]}={e.get("reason", "-")}')
		print(" ".join(sorted(seen)))
	EOF
}

# check HOST TOKEN [RULE]: RULE is the deciding rule, when one decided.
check() {
	local host=$1 token=$2 rule=${3:-} got want test_out replay_out now
	got=$(tokens "$host")
	want="connect=$token dns=$token http=$token tls=$token"
	expect_eq "$host: one token in every kind of log line" "$want" "$got"
	test_out=$("$AIRLOCK" policy test "$POL" "$host:443") && fail "policy test allowed $host"
	expect_eq "$host: policy test says $token" "deny $host:443 ${rule:+$rule }$token" "$test_out"
	# Replay a log in which the name was allowed: the new reason is the
	# one the log carries.
	printf '%s\n' \
		"{\"ts\":\"2026-12-01T10:00:00.000Z\",\"task\":\"t1\",\"kind\":\"connect\",\"host\":\"$host\",\"port\":443,\"verdict\":\"allow\",\"rule\":\"old.yaml:3\",\"bytes_up\":0,\"bytes_down\":0,\"duration_ms\":1}" \
		"{\"ts\":\"2026-12-01T10:00:00.000Z\",\"task\":\"t1\",\"kind\":\"dns\",\"host\":\"$host\",\"verdict\":\"allow\",\"rule\":\"old.yaml:3\",\"bytes_up\":0,\"bytes_down\":0,\"duration_ms\":1,\"qtype\":\"A\",\"rcode\":\"NOERROR\"}" \
		>"$LAB_WORK/old-$host.jsonl"
	replay_out=$("$AIRLOCK" log replay -p "$POL" "$LAB_WORK/old-$host.jsonl") && fail "replay: nothing changed for $host"
	# Replay names the rule where one decided, else the token.
	now=${rule:-$token}
	grep -Fq -- "$host:443" <<<"$(grep -F -- "now: $now" <<<"$replay_out")" ||
		fail "$host: replay (connect) does not say now: $now: $replay_out"
	grep -Fq -- "$host (dns)" <<<"$(grep -F -- "now: $now" <<<"$replay_out")" ||
		fail "$host: replay (dns) does not say now: $now: $replay_out"
}

POL=$(realpath "$POL")
check evil.test no-rule
check upload.pypi.org denied-by-rule "$POL:6"
# A rule decided: the rule is named, in the log as in policy test.
expect_logged_n 4 "deny rule in the log" "e.get('host') == 'upload.pypi.org' and e.get('rule') == '$POL:6'"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
echo "ok"
