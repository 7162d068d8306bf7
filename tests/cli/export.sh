#!/usr/bin/env bash
# airlock log export --format ocsf: every event line of a log becomes one
# OCSF 1.1 event of the class its kind belongs to, with the verdict, the
# destination, the bytes and the task carried over; task lines are left
# out; garbage is reported and skipped; bad options are one line, exit 2.
# Reads the fixtures in tests/elog/data: no namespaces, no network.
. "$(dirname "$0")/../lib.sh"

data=$(cd "$(dirname "$0")/../elog/data" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The fixtures carry no hash chain (and garbage on purpose): --unverified.
"$AIRLOCK" log export --format ocsf --unverified "$data/mixed.jsonl" "$data/audit-pip.jsonl" \
	"$data/packets.jsonl" >"$dir/out.jsonl" 2>"$dir/err" || fail "export failed: $(cat "$dir/err")"
# mixed.jsonl holds garbage lines on purpose: each is reported, nothing else.
! grep -v -E '^airlock: .*\.jsonl:[0-9]+: .*skipped$' "$dir/err" ||
	fail "export said more than the garbage lines: $(cat "$dir/err")"
grep -q 'mixed.jsonl:4:' "$dir/err" || fail "the garbage line 4 was not reported: $(cat "$dir/err")"
python3 - "$dir/out.jsonl" "$dir/err" "$data/mixed.jsonl" "$data/audit-pip.jsonl" "$data/packets.jsonl" <<'PY' ||
import json, re, sys
out = [json.loads(l) for l in open(sys.argv[1])]
# The lines the reader reported as garbage (FILE:LINE on stderr) are the
# ones it skipped; every other line of the inputs is a record.
skipped = set(re.findall(r"^airlock: (.*?):(\d+): ", open(sys.argv[2]).read(), re.M))
def records(path):
    for n, line in enumerate(open(path), 1):
        if (path, str(n)) not in skipped and line.strip():
            yield json.loads(line)
src = [r for f in sys.argv[3:] for r in records(f)]
assert len(skipped) >= 3, skipped
events = [e for e in src if e["kind"] not in ("task-start", "task-end", "log-budget")]
assert len(out) == len(events), (len(out), len(events))
classes = {"dns": 4003, "http": 4002}
for o, e in zip(out, events):
    want = classes.get(e["kind"], 4001)
    assert o["class_uid"] == want, (e, o)
    assert o["category_uid"] == 4
    assert o["type_uid"] == want * 100 + o["activity_id"], o
    assert o["metadata"]["correlation_uid"] == e["task"], o
    assert o["metadata"]["product"]["name"] == "airlock"
    assert o["metadata"]["original_time"] == e["ts"]
    disp = {"allow": 1, "deny": 2, "audit-deny": 15}[e["verdict"]]
    assert o["disposition_id"] == disp, (e, o)
    assert o["action_id"] == (2 if e["verdict"] == "deny" else 1), o
    assert o["unmapped"]["airlock"]["kind"] == e["kind"]
    assert o["unmapped"]["airlock"]["verdict"] == e["verdict"]
    assert o["traffic"]["bytes_out"] == e.get("bytes_up", 0)
    assert o["traffic"]["bytes_in"] == e.get("bytes_down", 0)
    if e.get("rule"):
        assert o["unmapped"]["airlock"]["rule"] == e["rule"]
    if e["kind"] == "dns":
        assert o["query"]["hostname"] == e["host"] and "dst_endpoint" not in o, o
        assert o["query"]["type"] == e["qtype"] and o["rcode"] == e["rcode"], o
    else:
        d = o["dst_endpoint"]
        if "port" in e:
            assert d["port"] == e["port"], o
        if "ip" in e:
            assert d["ip"] == e["ip"], o
    if e["kind"] == "http":
        assert o["http_request"]["http_method"] == e["method"], o
    if e["kind"] == "packet":
        n = e.get("packets", 1)  # older lines stand for one packet
        assert o["count"] == n and o["traffic"].get("packets", 1) == n, o
        assert o["connection_info"]["protocol_name"] == e["proto"], o
    if e["kind"] in ("connect", "tls", "tcp", "packet"):
        assert o["activity_id"] == (5 if e["verdict"] == "deny" else 6), o
print(len(out), "events")
PY
	fail "the OCSF events do not match the log"
echo "ok   every event line is one OCSF event of its class"

# A host that is an address literal is the destination's ip, not a name.
printf '%s\n' '{"ts":"2026-11-30T14:00:00.000Z","task":"t","kind":"connect","host":"192.0.2.9","port":22,"verdict":"deny","reason":"no-rule","bytes_up":0,"bytes_down":0,"duration_ms":0}' \
	'not json' >"$dir/lit.jsonl"
out=$("$AIRLOCK" log export --format ocsf --unverified "$dir/lit.jsonl" 2>"$dir/err")
expect_match "literal host as ip" '"dst_endpoint":\{"type_id":0,"ip":"192.0.2.9","port":22\}' "$out"
expect_match "garbage reported" 'lit.jsonl:2' "$(cat "$dir/err")"
echo "ok   an address literal is the ip; garbage is reported and skipped"

# Without --unverified a log that is not whole is not exported, and the
# line that breaks it is named (a chained log, changed: tests/cli/logs.sh).
rc=0
out=$("$AIRLOCK" log export --format ocsf "$dir/lit.jsonl" 2>"$dir/err") || rc=$?
expect_eq "a broken log, verified" 1 "$rc"
[ -z "$out" ] || fail "a broken log was exported: $out"
expect_match "the break named" 'lit.jsonl:2: not a log line.*not exported' "$(cat "$dir/err")"
rc=0
"$AIRLOCK" log export --format ocsf - <"$dir/lit.jsonl" >/dev/null 2>"$dir/err" || rc=$?
expect_eq "stdin, verified" 1 "$rc"
expect_match "stdin said" 'standard input cannot be read twice' "$(cat "$dir/err")"
echo "ok   a log that is not whole is not exported without --unverified"

rc=0
"$AIRLOCK" log export "$data/mixed.jsonl" >/dev/null 2>"$dir/err" || rc=$?
expect_eq "export without --format" 2 "$rc"
expect_match "one line" '^airlock: log export: --format is required' "$(cat "$dir/err")"
rc=0
"$AIRLOCK" log export --format cef "$data/mixed.jsonl" >/dev/null 2>"$dir/err" || rc=$?
expect_eq "unknown format" 2 "$rc"
rc=0
"$AIRLOCK" log export --format ocsf --unverified "$dir/missing.jsonl" >/dev/null 2>"$dir/err" || rc=$?
expect_eq "unreadable file" 1 "$rc"
echo "ok   bad options and files: one line, exit 2 or 1"
echo "export: all passed"
