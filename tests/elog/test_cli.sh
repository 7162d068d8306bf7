#!/usr/bin/env bash
# `airlock log` as a user runs it, over the recorded logs: exit statuses,
# stderr reports of garbage lines with file and line, --json pass-through
# byte for byte, colour only when asked (stdout here is never a terminal),
# and suggest's output passing `airlock policy check`.
. "$(dirname "$0")/../lib.sh"
D=$TESTS_DIR/elog/data
scratch_dir

# Usage errors are 2.
set +e
"$AIRLOCK" log >/dev/null 2>&1; expect_eq "log alone" 2 $?
"$AIRLOCK" log frobnicate x >/dev/null 2>&1; expect_eq "unknown subcommand" 2 $?
"$AIRLOCK" log show >/dev/null 2>&1; expect_eq "show without FILE" 2 $?
"$AIRLOCK" log show --since yesterday "$D/mixed.jsonl" >/dev/null 2>&1; expect_eq "bad --since" 2 $?
"$AIRLOCK" log replay "$D/mixed.jsonl" >/dev/null 2>&1; expect_eq "replay without -p" 2 $?
"$AIRLOCK" log suggest --wildcard-min x "$D/mixed.jsonl" >/dev/null 2>&1; expect_eq "bad --wildcard-min" 2 $?
"$AIRLOCK" log summary "$SCRATCH/missing.jsonl" >/dev/null 2>&1; expect_eq "missing file" 1 $?
set -e
"$AIRLOCK" log --help | grep -q 'airlock log summary' || fail "log --help"

# Garbage lines: reported with file and line, then skipped; exit 0.
"$AIRLOCK" log show "$D/mixed.jsonl" >"$SCRATCH/show.out" 2>"$SCRATCH/show.err"
expect_eq "show: lines" 9 "$(wc -l <"$SCRATCH/show.out")"
grep -q "mixed.jsonl:4: unexpected character" "$SCRATCH/show.err" || fail "no report for line 4: $(cat "$SCRATCH/show.err")"
grep -q "mixed.jsonl:13: last line is cut short" "$SCRATCH/show.err" || fail "no report for the cut line"
expect_eq "show: garbage reports" 4 "$(wc -l <"$SCRATCH/show.err")"

# No colour on a pipe; colour when forced; NO_COLOR is for auto only.
if grep -q $'\033' "$SCRATCH/show.out"; then fail "colour on a pipe"; fi
"$AIRLOCK" log show --color always "$D/mixed.jsonl" 2>/dev/null | grep -q $'\033\[31mdeny' ||
	fail "--color always shows no red deny"

# --json: the selected lines, byte for byte.
"$AIRLOCK" log show --json --task b1 "$D/mixed.jsonl" 2>/dev/null >"$SCRATCH/b1.jsonl"
grep -F '"task":"b1"' "$D/mixed.jsonl" | grep -v '"port":"443"' | grep -v '"ts":"yesterday"' >"$SCRATCH/b1.expect"
cmp "$SCRATCH/b1.jsonl" "$SCRATCH/b1.expect" || fail "--json is not the original lines"
# stdin works too.
expect_eq "stdin" 3 "$("$AIRLOCK" log show --denied - <"$D/mixed.jsonl" 2>/dev/null | wc -l)"

# summary --json is one JSON document.
"$AIRLOCK" log summary --json "$D"/*.jsonl 2>/dev/null | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
d = {x["destination"]: x for x in s["destinations"]}
assert d["pypi.org:443"]["attempts"] == 4, d["pypi.org:443"]
assert {t["task"] for t in s["tasks"]} == {"a1", "b1", "c2", "o1", "p1", "r1", "s1", "s2", "w1"}, s["tasks"]
' || fail "summary --json"

# suggest: a valid policy, warnings on stderr.
"$AIRLOCK" log suggest "$D"/*.jsonl >"$SCRATCH/p.yaml" 2>"$SCRATCH/suggest.err"
"$AIRLOCK" policy check "$SCRATCH/p.yaml" >/dev/null || fail "suggested policy invalid: $(cat "$SCRATCH/p.yaml")"
grep -q 'contacted without a name' "$SCRATCH/suggest.err" || fail "no address warning"

# replay: 0 when nothing changes, 1 when something does, 2 for a bad policy.
# The suggestion allows nothing that was only denied in enforce mode, so
# replaying the logs under it changes nothing; with --include-denied it
# allows upload.pypi.org, denied before.
"$AIRLOCK" log replay -p "$SCRATCH/p.yaml" "$D/mixed.jsonl" >"$SCRATCH/r.out" 2>/dev/null && rc=0 || rc=$?
expect_eq "replay of the suggestion" 0 "$rc"
"$AIRLOCK" log suggest --include-denied "$D"/*.jsonl >"$SCRATCH/p2.yaml" 2>/dev/null
"$AIRLOCK" log replay -p "$SCRATCH/p2.yaml" "$D/mixed.jsonl" >"$SCRATCH/r.out" 2>/dev/null && rc=0 || rc=$?
expect_eq "replay with changes" 1 "$rc"
grep -q "upload.pypi.org:443" "$SCRATCH/r.out" || fail "replay does not list upload.pypi.org: $(cat "$SCRATCH/r.out")"
printf 'version: 1\nname: x\nallow: [\n' >"$SCRATCH/bad.yaml"
"$AIRLOCK" log replay -p "$SCRATCH/bad.yaml" "$D/mixed.jsonl" >/dev/null 2>&1 && rc=0 || rc=$?
expect_eq "replay with a bad policy" 2 "$rc"
grep -v '"task":"c2"' "$D/mixed.jsonl" | grep '"verdict":"allow"' >"$SCRATCH/allowed.jsonl" || true
printf 'version: 1\nname: same\nallow:\n  - host: pypi.org\n    ports: [443]\n' >"$SCRATCH/same.yaml"
"$AIRLOCK" log replay -p "$SCRATCH/same.yaml" "$SCRATCH/allowed.jsonl" >/dev/null 2>&1 && rc=0 || rc=$?
expect_eq "replay without changes" 0 "$rc"
# verify: 3 for logs from before the chain, 1 naming the first garbage
# line, 1 for a missing file, 2 without FILE.
set +e
out=$("$AIRLOCK" log verify "$D/audit-pip.jsonl" "$D/packets.jsonl" 2>&1); rc=$?
expect_eq "verify, unchained logs" 3 "$rc"
expect_match "verify, unchained summary" '^no chain: 12 lines in 2 files; 12 lines carry no chain' "$out"
out=$("$AIRLOCK" log verify "$D/mixed.jsonl" 2>&1); rc=$?
expect_eq "verify, a garbage line" 1 "$rc"
expect_match "verify, the garbage line named" "^$D/mixed.jsonl:4: not a log line" "$out"
"$AIRLOCK" log verify "$SCRATCH/missing.jsonl" >/dev/null 2>&1; expect_eq "verify, missing file" 1 $?
"$AIRLOCK" log verify >/dev/null 2>&1; expect_eq "verify without FILE" 2 $?
set -e
echo "log cli: ok"
