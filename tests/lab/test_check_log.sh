#!/usr/bin/env bash
# check_log.py, the schema v1 checker the lab tests rely on, can fail: it
# accepts docs/log.md's own examples and rejects each kind of defect.
. "$(dirname "$0")/../lib.sh"
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is not installed"
scratch_dir
CHECK="/usr/bin/python3 $TESTS_DIR/lab/check_log.py"

start='{"ts":"2026-11-30T10:24:40.001Z","task":"7f3a","kind":"task-start","airlock":"0.1.0","pid":4242,"policy":"pypi","policy_sha256":"9f2c000000000000000000000000000000000000000000000000000000000000","mode":"enforce","command":["pip","install","requests"],"selftest":"pass"}'
tls='{"ts":"2026-11-30T10:24:48.123Z","task":"7f3a","kind":"tls","host":"evil.test","ip":"203.0.113.66","port":443,"verdict":"deny","reason":"no match","bytes_up":517,"bytes_down":0,"duration_ms":2,"sni":"evil.test"}'
dns='{"ts":"2026-11-30T10:24:49.001Z","task":"7f3a","kind":"dns","host":"pypi.org","verdict":"allow","rule":"policies/pypi.yaml:6","bytes_up":0,"bytes_down":0,"duration_ms":3,"qtype":"A","rcode":"NOERROR","answers":["192.0.2.10"]}'
pkt='{"ts":"2026-11-30T10:24:49.200Z","task":"7f3a","kind":"packet","ip":"198.51.100.53","port":443,"verdict":"deny","reason":"udp is not proxied","bytes_up":0,"bytes_down":0,"duration_ms":0,"proto":"udp"}'
conn='{"ts":"2026-11-30T11:00:28.139Z","task":"7f3a","kind":"connect","host":"pypi.org","ip":"2001:db8:1::10","port":443,"verdict":"audit-deny","reason":"no rule allows pypi.org port 443","bytes_up":1266,"bytes_down":2247,"duration_ms":480,"method":"CONNECT","url":"pypi.org:443"}'
end='{"ts":"2026-11-30T10:24:43.500Z","task":"7f3a","kind":"task-end","exit_status":0,"signal":0,"duration_ms":3499,"totals":{"connections":4,"allowed":1,"denied":3,"bytes_up":1783,"bytes_down":2247}}'

good=$SCRATCH/good.jsonl
printf '%s\n' "$start" "$conn" "$tls" "$dns" "$pkt" "$end" >"$good"
$CHECK "$good" >/dev/null || fail "the documented examples are rejected: $($CHECK "$good")"
# Counted repeats stand for their count; the log budget's line and
# task-end's unlogged (docs/log.md, "Repeated events", "The log budget").
rep='{"ts":"2026-12-01T20:53:19.488Z","task":"7f3a","kind":"dns","host":"same.evil.test","verdict":"deny","reason":"not in allowlist","bytes_up":0,"bytes_down":0,"duration_ms":1,"qtype":"A","rcode":"NXDOMAIN","count":47793}'
budget='{"ts":"2026-12-01T20:53:49.374Z","task":"7f3a","kind":"log-budget","reason":"egress log budget of 4096 bytes spent: detail stops, counts go on (task-end), new destinations are refused","log_budget":4096}'
printf '%s\n' "$start" "$conn" "$tls" "$dns" "$pkt" "$rep" "$budget" \
	"${end/\"connections\":4,\"allowed\":1,\"denied\":3/\"connections\":47797,\"allowed\":1,\"denied\":47796}" \
	>"$good"
$CHECK "$good" >/dev/null || fail "counted repeats are rejected: $($CHECK "$good")"
printf '%s\n' "$start" "$conn" "$budget" \
	"${end/\"bytes_down\":2247\}/\"bytes_down\":2247,\"unlogged\":3\}}" >"$good"
$CHECK "$good" >/dev/null || fail "unlogged events are rejected: $($CHECK "$good")"

# bad NAME EXPECTED-MESSAGE-REGEX LINE...: a log made of LINEs is rejected
# with a message matching the regex.
bad() {
	local name=$1 re=$2 out
	shift 2
	printf '%s\n' "$@" >"$SCRATCH/$name.jsonl"
	if out=$($CHECK "$SCRATCH/$name.jsonl"); then
		fail "$name: accepted"
	fi
	expect_match "$name" "$re" "$out"
}
bad wrong-type 'port must be a non-negative integer' "$start" "${tls/\"port\":443/\"port\":\"443\"}"
bad unknown-field "undocumented field 'color'" "$start" "${tls/\"sni\"/\"color\":\"red\",\"sni\"}"
bad order "out of the documented order" "$start" "${tls/\"host\":\"evil.test\",\"ip\":\"203.0.113.66\"/\"ip\":\"203.0.113.66\",\"host\":\"evil.test\"}"
bad no-verdict "without verdict" "$start" "${tls/\"verdict\":\"deny\",/}"
bad bad-verdict "verdict 'maybe'" "$start" "${tls/\"deny\"/\"maybe\"}"
bad no-reason "neither rule nor reason" "$start" "${tls/\"reason\":\"no match\",/}"
bad allow-no-rule "allow without the rule" "$start" "${dns/\"rule\":\"policies\/pypi.yaml:6\",/}"
bad sni-on-dns "sni on a dns line" "$start" "${dns/\"answers\"/\"sni\":\"x\",\"answers\"}"
bad ts "not RFC 3339" "$start" "${tls/10:24:48.123Z/10:24:48Z}"
bad dup-key "duplicate key" "$start" "${tls/\"sni\":\"evil.test\"/\"sni\":\"evil.test\",\"sni\":\"x\"}"
bad not-json "not JSON" "$start" '{"ts": '
bad totals "totals.connections is 4, the task's lines add up to 2" "$start" "$tls" "$dns" "$end"
bad after-end "after the task's task-end" "$start" "$conn" "$tls" "$dns" "$pkt" "$end" "$pkt"
bad sni-on-connect "sni on a connect line" "$start" "${conn/\"method\"/\"sni\":\"x\",\"method\"}"
bad no-start "has no task-start" "$tls"
bad count-zero "count 0 is not a positive integer" "$start" "${rep/47793/0}"
bad tls-without-sni "tls line without sni" "$start" "${tls/,\"sni\":\"evil.test\"/}"
bad start-without-policy "task-start without policy" "${start/\"policy\":\"pypi\",/}"
# What docs/log.md leaves out when unknown may be missing: an unreadable
# request's host, method and url; airlock proxy's selftest and command.
ok=$SCRATCH/unknown.jsonl
printf '%s\n' "${start/,\"command\":\[\"pip\",\"install\",\"requests\"\],\"selftest\":\"pass\"/}" \
	'{"ts":"2026-11-30T10:24:48.123Z","task":"7f3a","kind":"http","ip":"203.0.113.66","port":80,"verdict":"deny","reason":"request head not complete in time","bytes_up":0,"bytes_down":0,"duration_ms":5007}' >"$ok"
$CHECK "$ok" >/dev/null || fail "fields left out when unknown are demanded: $($CHECK "$ok")"
long=$(printf 'a%.0s' $(seq 300))
bad cap "host is 300 bytes, over its cap of 255" "$start" "${tls/\"host\":\"evil.test\"/\"host\":\"$long\"}"
printf '%s' "$start" >"$SCRATCH/cut.jsonl"
out=$($CHECK "$SCRATCH/cut.jsonl") && fail "a cut last line is accepted"
expect_match "cut line" "not terminated" "$out"
# The hash chain (docs/log.md, "The hash chain"): the examples chained
# here by a second implementation are accepted; a gap and a changed line
# are not.
chain() {
	/usr/bin/python3 -c '
import hashlib, sys
prev, seq = "0" * 64, 0
for line in sys.stdin.read().splitlines():
    line = line[:-1] + ",\"seq\":%d,\"prev\":\"%s\"}" % (seq, prev)
    print(line)
    prev, seq = hashlib.sha256(line.encode()).hexdigest(), seq + 1
'
}
printf '%s\n' "$start" "$conn" "$tls" "$dns" "$pkt" "$end" | chain >"$SCRATCH/chained.jsonl"
$CHECK "$SCRATCH/chained.jsonl" >/dev/null || fail "a chained log is rejected: $($CHECK "$SCRATCH/chained.jsonl")"
mapfile -t ch <"$SCRATCH/chained.jsonl"
bad chain-gap "the chain wants seq 2" "${ch[0]}" "${ch[1]}" "${ch[3]}" "${ch[4]}"
bad chain-edit "the chain wants seq 3, prev" "${ch[0]}" "${ch[1]}" "${ch[2]/evil.test/evil.tesT}" "${ch[3]}"
echo "check_log.py accepts docs/log.md's examples and rejects 22 kinds of defect"
