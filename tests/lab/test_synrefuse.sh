#!/usr/bin/env bash
# Refused at the SYN (issue 21, rough edge 8): a transparent connection the
# policy refuses whatever the client could still send - a port no allow
# rule opens, an address the guard refuses - is answered by nftables with
# a TCP reset to the SYN, so the client sees "connection refused" (curl
# exit 7), not a handshake and then "connection reset by peer" (exit 56).
# Each attempt is one deny line (kind tcp, the proxy's reason token) and a
# stderr notice. What a name could still open goes on as before.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
lab_start

cat >"$LAB_WORK/syn.yaml" <<EOF
version: 1
name: syn-refuse-test
allow:
  - host: pypi.org
    ports: [80, 443]
  - cidr: $FILES_V4/32
    ports: [80]
EOF

# curl_rc NAME ARGS...: curl inside airlock run, its exit code in
# $LAB_WORK/NAME.rc, airlock's and curl's stderr in NAME.err.
curl_rc() {
	local name=$1
	shift
	airlock_lab "$LAB_WORK/syn.yaml" -- sh -c 'curl -sS --noproxy "*" --max-time 10 -o /dev/null "$@"; echo $? >"$0"' \
		"$LAB_WORK/$name.rc" "$@" 2>"$LAB_WORK/$name.err" || true
	[ -s "$LAB_WORK/$name.rc" ] || fail "$name: airlock run failed: $(tail -n 5 "$LAB_WORK/$name.err")"
	cat "$LAB_WORK/$name.rc"
}

# refused NAME IP PORT REASON URL: curl exits 7 (connection refused), one
# deny line of kind tcp with the reason, and stderr names the destination.
refused() {
	local name=$1 ip=$2 port=$3 reason=$4 url=$5 rc n key
	key="$ip:$port"
	case $ip in *:*) key="\\[$ip\\]:$port" ;; esac
	: >"$LOGF"
	rc=$(curl_rc "$name" "$url")
	[ "$rc" = 7 ] || fail "$name: curl exit $rc, expected 7 (connection refused): $(tail -n 3 "$LAB_WORK/$name.err")"
	expect_logged "$name: a deny line" \
		"e.get('kind') == 'tcp' and e.get('verdict') == 'deny' and e.get('ip') == '$ip' and
		 e.get('port') == $port and e.get('reason') == '$reason'"
	n=$(log_count "e.get('ip') == '$ip' and e.get('verdict') == 'deny'")
	[ "$n" = 1 ] || fail "$name: $n deny lines for $ip, expected 1: $(cat "$LOGF")"
	grep -Eq "airlock: refused $key: .*\($reason\)" "$LAB_WORK/$name.err" ||
		fail "$name: stderr does not name $key ($reason): $(cat "$LAB_WORK/$name.err")"
	/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" >/dev/null || fail "$name: the egress log does not match docs/log.md"
	echo "ok   $name: curl exit 7, one deny line ($reason), stderr: $(grep -o -m1 "airlock: refused $key.*" "$LAB_WORK/$name.err")"
}

# A port no rule opens, on a public (lab) address; the canary listens there.
refused port25 "$EVIL_V4" 25 no-rule "http://$EVIL_V4:25/"
refused port25-v6 "$EVIL_V6" 25 no-rule "http://[$EVIL_V6]:25/"
# Guarded addresses on a port some rule opens: metadata, a private one.
refused metadata "$METADATA_V4" 80 address-guard "http://$METADATA_V4/latest/meta-data/"
refused private 10.1.2.3 443 address-guard "https://10.1.2.3/"
refused private-v6 fd00::1 80 address-guard "http://[fd00::1]/"
expect_canaries_silent "refused at the SYN"

# What a rule allows still works: an address a cidr rule opens, and a
# name-less connection (no Host) to an address DNS taught for pypi.org.
rc=$(curl_rc cidr "http://$FILES_V4/")
[ "$rc" = 0 ] || fail "cidr-allowed $FILES_V4:80: curl exit $rc: $(tail -n 3 "$LAB_WORK/cidr.err")"
echo "ok   an address a cidr rule opens: curl exit 0"
airlock_lab "$LAB_WORK/syn.yaml" -- sh -c \
	'ip=$(getent ahostsv4 pypi.org | awk "NR == 1 { print \$1 }") &&
	 curl -sS --noproxy "*" --max-time 10 -o /dev/null -H "Host:" "http://$ip/"' \
	2>"$LAB_WORK/learned.err" || fail "a name-less connection to pypi.org's address: $(tail -n 3 "$LAB_WORK/learned.err")"
echo "ok   a name-less connection to an address learned from DNS: works"

# The rules are in the sandbox's ruleset, before nat.
out=$(airlock_lab "$LAB_WORK/syn.yaml" -- nft list table inet airlock 2>&1) ||
	fail "nft list inside: $out"
expect_match "a refuse chain before nat" 'type filter hook output priority (mangle|-150)' "$out"
expect_match "the no-rule log prefix" 'log prefix "airlock-syn no-rule"' "$out"
expect_match "the guard log prefix" 'log prefix "airlock-syn address-guard"' "$out"
echo "ok   nft list shows the refuse chain"

# Audit mode refuses no port: port 25 reaches the proxy (and the canary).
: >"$LOGF"
airlock_lab "$LAB_WORK/syn.yaml" --audit -- sh -c 'curl -sS --noproxy "*" --max-time 10 -o /dev/null "$@"; echo $? >"$0"' \
	"$LAB_WORK/audit.rc" "http://$EVIL_V4:25/" 2>"$LAB_WORK/audit.err" || true
rc=$(cat "$LAB_WORK/audit.rc")
[ "$rc" != 7 ] || fail "audit: port 25 refused at the SYN: $(tail -n 3 "$LAB_WORK/audit.err")"
expect_logged "audit: the proxy's audit-deny line" \
	"e.get('ip') == '$EVIL_V4' and e.get('port') == 25 and e.get('verdict') == 'audit-deny'"
echo "ok   audit mode: port 25 goes through the proxy (curl exit $rc, audit-deny line)"

/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
echo "syn-refuse: refused ports and guarded addresses get connection refused, one line each"
