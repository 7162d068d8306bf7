#!/usr/bin/env bash
# Blocking exfiltration, and reviewing it. A hostile task under the PyPI
# preset tries curl, python and nc to evil.test by name and by address,
# over TCP and UDP, v4 and v6, with and without the proxy variables, DNS TXT
# tunnelling through every resolver it can name, the host's own services
# and cloud metadata; then rebinding through names a policy allows. All of
# it fails, no canary sees a byte, the lab's resolver never hears an evil
# name, every attempt is in the egress log with its verdict and rule or
# reason, the log matches docs/log.md, and `airlock log` reviews it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
need_prog nc timeout
lab_start
cp "$TESTS_DIR/lab/attempts.sh" "$LAB_WORK/attempts.sh"

# result NAME: the exit status attempts.sh recorded for NAME.
result() {
	awk -v n="$1" '$1 == n { print $2; f = 1 } END { if (!f) print "missing" }' "$2"
}

expect_blocked() {
	local res=$1 name rc
	shift
	for name in "$@"; do
		rc=$(result "$name" "$res")
		[ "$rc" != missing ] || fail "attempt $name did not run"
		[ "$rc" != 0 ] || fail "attempt $name succeeded"
	done
}

# --- the attempts, under the shipped PyPI preset -------------------------
res=$LAB_WORK/results-exfil
airlock_lab "$SOURCE_ROOT/policies/pypi.yaml" -- sh "$LAB_WORK/attempts.sh" "$res" exfil ||
	fail "airlock run of the attempts failed (status $?)"
expect_eq "control: pypi.org through airlock" 0 "$(result control-pypi "$res")"
expect_blocked "$res" curl-proxy-https curl-proxy-http curl-noproxy-https curl-unset-proxy \
	curl-proxy-ip curl-direct-ip curl-direct-ip6 curl-forged-host \
	curl-proxy-loopback curl-proxy-host curl-metadata \
	python-urllib python-socket \
	dig-txt dig-txt-lab-resolver dig-txt-evil-server dig-txt-tcp
# nc and the UDP senders cannot tell (a connection the proxy accepts and
# closes, a datagram sent); the canaries and the log below decide.

expect_canaries_silent "exfiltration"
expect_dns_never_saw "exfiltration" 'evil'

# Every attempt is in the log, denied, with its rule or reason.
denied() { expect_logged "$1" "e.get('verdict') == 'deny' and ($2)"; }
# Counts: one line per attempt at least (curl and python via CONNECT; two
# clients resolving evil.test directly, A and AAAA each; nc and python raw
# TCP to port 4444).
expect_logged_n 2 "CONNECT evil.test (curl, python)" \
	"e.get('verdict') == 'deny' and e['kind'] == 'connect' and e.get('host') == 'evil.test'"
expect_logged_n 4 "evil.test lookups (curl --noproxy, curl without proxy variables)" \
	"e.get('verdict') == 'deny' and e['kind'] == 'dns' and e.get('host', '').lower() == 'evil.test'"
expect_logged_n 2 "raw TCP to evil:4444 (python, nc)" \
	"e.get('verdict') == 'deny' and e.get('ip') == '$LAB_EVIL_V4' and e.get('port') == 4444 and e['kind'] != 'packet'"
denied "curl via absolute-form" "e['kind'] == 'http' and e.get('host') == 'evil.test'"
denied "resolving evil.test" "e['kind'] == 'dns' and e.get('host', '').lower() == 'evil.test'"
denied "TXT tunnel" "e['kind'] == 'dns' and e.get('host', '').lower() == 'secret.evil.test' and e.get('qtype') == 'TXT'"
[ "$(log_count "e['kind'] == 'dns' and e.get('host', '').lower() == 'secret.evil.test' and e.get('verdict') == 'deny'")" -ge 4 ] ||
	fail "not every TXT query (own resolver, lab resolver, evil server, TCP) is logged as denied"
denied "proxy to an IP literal" "e['kind'] == 'http' and e.get('host') == '$LAB_EVIL_V4'"
denied "direct to evil by IP, port 80" "e.get('ip') == '$LAB_EVIL_V4' and e.get('port') == 80 and e['kind'] in ('http', 'tcp')"
denied "direct to evil by IPv6" "e.get('ip') == '$LAB_EVIL_V6' and e.get('port') == 443"
denied "raw TCP 4444" "e.get('ip') == '$LAB_EVIL_V4' and e.get('port') == 4444"
denied "raw TCP 4444 over v6" "e.get('ip') == '$LAB_EVIL_V6' and e.get('port') == 4444"
denied "UDP to evil" "e['kind'] == 'packet' and e.get('ip') == '$LAB_EVIL_V4' and e.get('proto') == 'udp'"
denied "UDP to evil over v6" "e['kind'] == 'packet' and e.get('ip') == '$LAB_EVIL_V6' and e.get('proto') == 'udp'"
denied "proxy to the host's loopback" "e.get('host') == '127.0.0.1' or e.get('ip') == '127.0.0.1'"
denied "proxy to the host's address" "e.get('host') == '$LAB_CLIENT_V4' or e.get('ip') == '$LAB_CLIENT_V4'"
denied "cloud metadata" "e.get('ip') == '$LAB_METADATA_V4'"
# Port 80 is one no rule of the pypi preset opens: refused at the SYN
# (docs/run.md), before any Host is read.
denied "Host forged as pypi.org on port 80" \
	"e.get('kind') == 'tcp' and e.get('ip') == '$LAB_EVIL_V4' and e.get('port') == 80 and e.get('reason') == 'no-rule'"
[ "$(log_count "e.get('verdict') == 'deny' and 'rule' not in e and not e.get('reason')")" = 0 ] ||
	fail "a denial without rule or reason"
# Nothing but the preset's names was allowed, and never to evil's address.
[ "$(log_count "e.get('verdict') == 'allow' and e.get('host', '').lower() not in ('pypi.org', 'files.pythonhosted.org')")" = 0 ] ||
	fail "something besides pypi.org was allowed"
[ "$(log_count "e.get('verdict') == 'allow' and e.get('ip') in ('$LAB_EVIL_V4', '$LAB_EVIL_V6')")" = 0 ] ||
	fail "a connection to evil.test's address was allowed (SNI/Host forged as pypi.org?)"

# What a client is told: the proxy's 403 names the decision.
out=$(airlock_lab "$SOURCE_ROOT/policies/pypi.yaml" -- curl -sS -i http://evil.test/x) ||
	fail "curl through airlock failed outright"
expect_match "403 status line" "^HTTP/1\.1 403" "$out"
expect_match "403 body names the destination and the decision" \
	"denied evil\.test port 80: .*(no rule|no match|not allowed)" "$out"

# --- rebinding: names the policy allows, answers it must not use -------
cat >"$LAB_WORK/rebind.yaml" <<EOF
version: 1
name: rebind-test
description: allows names whose lab answers are loopback, metadata and the host itself
allow:
  - host: pypi.org
    ports: [443]
  - host: rebind-loopback.test
    ports: [80]
  - host: rebind-metadata.test
    ports: [80]
  - host: rebind-host.test
    ports: [8080]
EOF
res=$LAB_WORK/results-rebind
airlock_lab "$LAB_WORK/rebind.yaml" -- sh "$LAB_WORK/attempts.sh" "$res" rebind ||
	fail "airlock run of the rebind attempts failed"
expect_eq "control: pypi.org under the rebind policy" 0 "$(result control-pypi "$res")"
expect_blocked "$res" rebind-loopback rebind-metadata rebind-host rebind-loopback-direct rebind-metadata-direct
expect_canaries_silent "rebinding"
for n in loopback metadata host; do
	expect_logged "rebind-$n refused by the address guard" \
		"e.get('host', '').lower() == 'rebind-$n.test' and e.get('verdict') == 'deny' and
		 ('guard' in e.get('reason', '') or \"this host's addresses\" in e.get('reason', ''))"
done

# --- reviewing ----------------------------------------------------------
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
out=$("$AIRLOCK" log show --denied "$LOGF") || fail "airlock log show failed"
expect_match "log show --denied" "deny +connect +evil\.test:443" "$out"
if grep -q ' allow ' <<<"$out"; then
	fail "log show --denied lists an allowed event"
fi
out=$("$AIRLOCK" log summary "$LOGF") || fail "airlock log summary failed"
expect_match "log summary" "evil\.test" "$out"
expect_match "log summary" "pypi\.org" "$out"
echo "exfiltration: $(( $(grep -c . "$LAB_WORK/results-exfil") - 1 )) attempts blocked and logged; rebinding refused; log valid and reviewed"
