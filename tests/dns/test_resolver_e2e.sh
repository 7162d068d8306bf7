#!/usr/bin/env bash
# One resolver for the proxy and the DNS listener (issue 15, items 5 and 7),
# through `airlock run` and `airlock proxy` in the test lab, against a
# scriptable upstream (tests/dns/fakedns.py) that logs every query:
#   - a CNAME chain through a denied name is refused by the proxy too;
#   - CONNECT by name is answered from the shared cache (counted queries);
#   - a name with 40 A records (truncated over UDP) resolves for the proxy;
#   - an upstream answering in 1.4 s is answered (retries keep the first
#     try's answer), by the listener and by the proxy;
#   - a DNS timeout is 504 dns_timeout on every path, NXDOMAIN 502 dns_error;
#   - a transparent connection to the address the listener handed out is
#     accepted though the upstream rotates its answers;
#   - `airlock proxy` honours /etc/hosts (and --hosts-file), the address
#     guard still applies to what it lists.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

EVIL=203.0.113.66 # nginx on 80 and 443
ZONE=$LAB_WORK/zone.json
QLOG=$LAB_WORK/queries.log
/usr/bin/python3 - "$ZONE" <<-'PY'
	import json, sys
	many = ["203.0.113.66"] + ["203.0.113.%d" % i for i in range(100, 139)]
	z = {
	    "ok.test": {"a": ["203.0.113.66"], "ttl": 300},
	    "chain.test": {"cname": "secret.evil.test"},
	    "secret.evil.test": {"a": ["203.0.113.66"]},
	    "many.test": {"a": many},
	    "slow.test": {"a": ["203.0.113.66"], "delay_ms": 1400},
	    "black.test": {"drop": True},
	    "rot.test": {"a": ["203.0.113.66", "203.0.113.67"], "rotate": True, "ttl": 0},
	}
	json.dump(z, open(sys.argv[1], "w"))
PY
: >"$QLOG"
FAKE=$(lab_script "$SOURCE_ROOT/tests/dns/fakedns.py")
in_lab /usr/bin/python3 "$FAKE" "$ZONE" 127.0.0.1 5399 "$QLOG" >"$LAB_LOG/fakedns.out" 2>&1 &
FAKE_PID=$!
for _ in $(seq 100); do grep -q ready "$LAB_LOG/fakedns.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$LAB_LOG/fakedns.out" || fail "fakedns did not start: $(cat "$LAB_LOG/fakedns.out")"
stop_fake() { kill "$FAKE_PID" 2>/dev/null || true; wait "$FAKE_PID" 2>/dev/null || true; }
# Without errexit here: the status must reach lab_stop, which tears the lab
# down (and dumps it on failure).
trap 'rc=$?; set +e; stop_fake; (exit $rc); lab_stop' EXIT

POL=$LAB_WORK/resolver.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: resolver-e2e
	allow:
	  - host: ok.test
	  - host: chain.test
	  - host: many.test
	  - host: slow.test
	  - host: black.test
	  - host: nx.test
	  - host: rot.test
	  - host: hosted.test
	  - host: private.test
	deny:
	  - host: secret.evil.test
YAML
PROBE=$(lab_script "$SOURCE_ROOT/tests/dns/resolver_probe.py")

queries() { grep -c " $1 " "$QLOG" || true; }

# Every check runs; the test fails at the end with all that went wrong.
FAILED=()
bad() { echo "FAIL: $*" >&2; FAILED+=("$*"); }
expect() { # LABEL REGEX
	grep -Eq -- "^$1 ($2)\$" <<<"$out" || bad "$1: expected /$2/; got: $(grep -E "^$1 " <<<"$out" || echo nothing)"
}

# The lab's /etc/hosts is $LAB/hosts (tests/lab/lab.sh exec): airlock run
# and airlock proxy read it; the sandbox's own /etc/hosts is generated, so
# it learns these names through its DNS listener.
cat >>"$LAB/hosts" <<-EOF
	$EVIL hosted.test
	10.1.2.3 private.test
EOF

# --- airlock run ---------------------------------------------------------
runs() {
	(cd "$LAB_WORK" && in_lab "$AIRLOCK" run -p "$POL" --dns-upstream 127.0.0.1:5399 --log "$LOGF" \
		-- /usr/bin/python3 "$PROBE" "$@" 2>&1) || true
}
out=$(runs connect connect-1 ok.test connect connect-2 ok.test connect connect-3 ok.test \
	connect connect-4 ok.test connect connect-5 ok.test \
	connect chain-connect chain.test get chain-get chain.test dns chain-dns chain.test \
	dns many-dns many.test connect many-connect many.test \
	dns slow-dns slow.test connect slow-connect slow.test \
	connect nx-connect nx.test get nx-get nx.test transparent nx-transparent nx.test $EVIL \
	connect black-connect black.test get black-get black.test \
	transparent black-transparent black.test $EVIL \
	transparent rot-transparent rot.test @ \
	dns run-hosts-dns hosted.test dns run-private-dns private.test \
	connect run-hosts-connect hosted.test transparent run-hosts-transparent hosted.test @)
printf '%s\n' "$out"
! grep -q Sanitizer <<<"$out" || fail "sanitizer report: $out"

# 1. The chain through a denied name: refused by the listener and the proxy.
expect chain-dns "rcode=0 an=0|rcode=3 an=0"
expect chain-connect "403 [a-z_]+"
expect chain-get "403 [a-z_]+"
[ "$(log_count 'e.get("kind") in ("connect", "http") and e.get("host") == "chain.test" and e.get("verdict") == "deny" and e.get("reason") == "cname-denied" and "CNAME" in e.get("detail", "")')" -gt 0 ] ||
	bad "no deny line naming the CNAME for chain.test"
# 2. Five CONNECTs by name cost one A and one AAAA upstream.
for i in 1 2 3 4 5; do expect connect-$i 200; done
n=$(queries ok.test)
echo "upstream queries for 5 CONNECTs to ok.test: $n"
[ "$n" -le 2 ] || bad "5 CONNECTs to ok.test cost $n upstream queries (want <= 2, one A + one AAAA)"
# 3. Forty A records: truncated over UDP, fetched over TCP, for both.
expect many-dns "rcode=0 an=40"
expect many-connect 200
# 4. An upstream that answers in 1.4 s (inside the 2 s budget).
expect slow-dns "rcode=0 an=1"
expect slow-connect 200
# 5. One status per cause on every proxy path.
for p in connect get transparent; do
	expect nx-$p "502 dns_error"
	expect black-$p "504 dns_timeout"
done
# 7. The address the listener handed out, though the upstream rotates.
expect rot-transparent 200
# 6. /etc/hosts inside airlock run: the listener and the proxy agree with
# the sandbox's C library, and the guard still removes a private address.
expect run-hosts-dns "rcode=0 an=1"
expect run-private-dns "rcode=0 an=0"
expect run-hosts-connect 200
expect run-hosts-transparent 200

# Audit mode: the chain is followed, and the line says enforce would not.
POL_AUDIT=$LAB_WORK/resolver-audit.yaml
sed 's/^name: resolver-e2e$/&\nmode: audit/' "$POL" >"$POL_AUDIT"
grep -q '^mode: audit' "$POL_AUDIT" || fail "could not write $POL_AUDIT"
out=$(cd "$LAB_WORK" && in_lab "$AIRLOCK" run -p "$POL_AUDIT" --dns-upstream 127.0.0.1:5399 \
	--log "$LAB_WORK/audit.jsonl" -- /usr/bin/python3 "$PROBE" connect audit-chain chain.test 2>&1) || true
printf '%s\n' "$out"
expect audit-chain 200
grep '"host":"chain.test"' "$LAB_WORK/audit.jsonl" | grep '"kind":"connect"' | grep '"verdict":"audit-deny"' |
	grep -q 'CNAME to a denied name' || bad "audit: no audit-deny line naming the CNAME: $(grep chain.test "$LAB_WORK/audit.jsonl")"

# --- airlock proxy: /etc/hosts --------------------------------------------
# A second file is given with --hosts-file.
printf '%s other.test\n' "$EVIL" >"$LAB_WORK/hosts.alt"
proxy_probe() { # PORT ARGS-TO-AIRLOCK-PROXY -- PROBE-ARGS
	local port=$1 pargs=() plog=$LAB_LOG/proxy-$1.log pid up=
	shift
	while [ "$1" != -- ]; do pargs+=("$1"); shift; done
	shift
	in_lab "$AIRLOCK" proxy -p "$POL" --listen 127.0.0.1:$port --dns-upstream 127.0.0.1:5399 \
		--log "$plog" "${pargs[@]}" >"$LAB_LOG/proxy.out" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		in_lab /usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && up=1 && break
		sleep 0.1
	done
	[ -n "$up" ] || bad "airlock proxy ${pargs[*]} did not start: $(cat "$LAB_LOG/proxy.out")"
	in_lab env AIRLOCK_PROBE_PROXY=127.0.0.1:$port /usr/bin/python3 "$PROBE" "$@" 2>&1 || true
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	grep -v '"task-' "$plog" >&2 || true
	! grep -q Sanitizer "$LAB_LOG/proxy.out" || fail "sanitizer report: $(cat "$LAB_LOG/proxy.out")"
}
# Not in $(...): proxy_probe's own checks must count.
proxy_probe 3199 -- connect hosts-connect hosted.test get hosts-get hosted.test \
	connect hosts-private private.test connect proxy-chain chain.test \
	connect proxy-black-connect black.test get proxy-black-get black.test \
	connect proxy-many many.test >"$LAB_WORK/probe.out"
out=$(cat "$LAB_WORK/probe.out")
printf '%s\n' "$out"
expect hosts-connect 200
expect hosts-get "200|404"
expect hosts-private "403 destination_ip_prohibited"
expect proxy-chain "403 [a-z_]+"
grep '"host":"private.test"' "$LAB_LOG/proxy-3199.log" | grep -q '"ip":"10.1.2.3"' ||
	bad "the guard's refusal of private.test does not name 10.1.2.3 as its ip"
expect proxy-black-connect "504 dns_timeout"
expect proxy-black-get "504 dns_timeout"
expect proxy-many 200
[ "$(queries hosted.test)" = 0 ] || bad "hosted.test is in /etc/hosts, yet it was asked upstream"
proxy_probe 3198 --hosts-file "$LAB_WORK/hosts.alt" -- connect alt-hosted hosted.test >"$LAB_WORK/probe.out"
out=$(cat "$LAB_WORK/probe.out")
printf '%s\n' "$out"
expect alt-hosted "502 dns_error"
[ ${#FAILED[@]} = 0 ] || fail "${#FAILED[@]} checks failed: ${FAILED[*]}"
echo ok
