#!/usr/bin/env bash
# Log identity and retention (issue 21, item 3): --task-id and --label in
# the log, the log directory found without globbing (log show --last,
# --task ID, --follow; --last for summary, suggest, replay, verify), and
# log prune. Runs airlock run (namespaces): as root, or skipped.
. "$(dirname "$0")/../lib.sh"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_STATE_HOME=$dir/state
logs=$XDG_STATE_HOME/airlock
printf 'version: 1\nname: none\n' >"$dir/none.yaml"
run() { (cd "$dir" && "$AIRLOCK" run -p "$dir/none.yaml" -q "$@"); }
run -- true 2>"$dir/err" || {
	grep -qi "user namespace\|Operation not permitted" "$dir/err" && skip "cannot create a sandbox here: $(cat "$dir/err")"
	fail "a plain run failed: $(cat "$dir/err")"
}

# --task-id: the log's task, the file's name, CMD's AIRLOCK_TASK; labels in
# task-start.
out=$(run --task-id build-42 --label team=ml --label "note=nightly run" -- sh -c 'echo "$AIRLOCK_TASK"')
expect_eq "AIRLOCK_TASK is --task-id" build-42 "$out"
[ -f "$logs/build-42.jsonl" ] || fail "no $logs/build-42.jsonl: $(ls "$logs")"
python3 - "$logs/build-42.jsonl" <<'PY' || fail "task-start: $(head -n 1 "$logs/build-42.jsonl")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert all(l["task"] == "build-42" for l in lines), lines
assert lines[0]["labels"] == {"team": "ml", "note": "nightly run"}, lines[0]
PY
echo "ok   --task-id and --label are in the log"

# A used id, a bad one, bad labels: refused in one line, nothing run.
for args in "--task-id build-42" "--task-id ../etc" "--task-id -x" "--label Bad=1" \
	"--label a=1 --label a=2" "--label nokey"; do
	rc=0
	# shellcheck disable=SC2086
	err=$(run $args -- sh -c 'echo RAN' 2>&1 >/dev/null) || rc=$?
	expect_eq "$args: exit" 125 "$rc"
	[ "$(wc -l <<<"$err")" = 1 ] || fail "$args: more than one line: $err"
done
echo "ok   a reused or malformed --task-id, and bad labels, are refused"

# --last, --task, --follow, and --last for the other commands.
sleep 1.1 # a later mtime than build-42's
run --task-id later -- sh -c 'curl -s -m 2 https://x.test/ >/dev/null; true' 2>/dev/null || true
expect_match "show --last" "task-start later " "$("$AIRLOCK" log show --last)"
expect_match "show --task" "task-start build-42 " "$("$AIRLOCK" log show --task build-42)"
expect_match "summary --last" "x.test:443" "$("$AIRLOCK" log summary --last)"
"$AIRLOCK" log verify --last >/dev/null || fail "verify --last"
expect_match "suggest --last" "x.test" "$("$AIRLOCK" log suggest --last 2>/dev/null)"
rc=0
"$AIRLOCK" log replay -p "$dir/none.yaml" --last >/dev/null 2>&1 || rc=$?
expect_eq "replay --last: nothing changes" 0 "$rc"
rc=0
"$AIRLOCK" log show --last "$logs/later.jsonl" >/dev/null 2>&1 || rc=$?
expect_eq "--last and FILE" 2 "$rc"
rc=0
"$AIRLOCK" log show --task nosuch >/dev/null 2>&1 || rc=$?
expect_eq "--task of no log" 1 "$rc"
echo "ok   --last and --task find logs without a FILE"

# export checks the chain: the run's own log exports; the same log with one
# address changed is refused, naming the line, unless --unverified.
out=$("$AIRLOCK" log export --format ocsf --last) || fail "export --last of a whole log"
expect_match "export --last" '"hostname":"x.test"' "$out"
sed 's/"host":"x.test"/"host":"y.test"/' "$logs/later.jsonl" >"$dir/changed.jsonl"
! cmp -s "$logs/later.jsonl" "$dir/changed.jsonl" || fail "the test did not change the log"
rc=0
out=$("$AIRLOCK" log export --format ocsf "$dir/changed.jsonl" 2>"$dir/err") || rc=$?
expect_eq "export of a changed log" 1 "$rc"
[ -z "$out" ] || fail "a changed log was exported"
expect_match "the change named" 'changed.jsonl:[0-9]+: .*not exported' "$(cat "$dir/err")"
expect_match "--unverified" '"hostname":"y.test"' \
	"$("$AIRLOCK" log export --format ocsf --unverified "$dir/changed.jsonl")"
echo "ok   export refuses a log whose chain breaks, unless --unverified"

# --follow: a line shows while the task still runs; it returns at its end.
(run --task-id slow -- sh -c 'sleep 1; curl -s -m 2 https://y.test/ >/dev/null; sleep 2' 2>/dev/null || true) &
runner=$!
for _ in $(seq 1 50); do [ -f "$logs/slow.jsonl" ] && break; sleep 0.1; done
timeout 20 "$AIRLOCK" log show --follow --task slow >"$dir/followed" &
follower=$!
seen=""
for _ in $(seq 1 40); do
	grep -q "y.test:443" "$dir/followed" && { seen=yes; break; }
	sleep 0.1
done
[ -n "$seen" ] || fail "--follow: the denial did not show while the task ran: $(cat "$dir/followed")"
grep -q "task-end" "$dir/followed" && fail "--follow: task-end already there, so this proves nothing"
wait "$follower" || fail "--follow did not end with its task (exit $?)"
grep -q "task-end   slow" "$dir/followed" || fail "--follow: no task-end: $(cat "$dir/followed")"
wait "$runner" || true
echo "ok   --follow shows lines as they come and ends with the task"

# prune: older logs go, newer stay, nothing else in the directory is touched.
touch -d '40 days ago' "$logs/build-42.jsonl"
echo keep >"$logs/notes.txt"
touch -d '40 days ago' "$logs/notes.txt"
out=$("$AIRLOCK" log prune --older 30d --dry-run 2>/dev/null)
expect_eq "prune --dry-run" "would remove $logs/build-42.jsonl" "$out"
[ -f "$logs/build-42.jsonl" ] || fail "--dry-run removed a log"
"$AIRLOCK" log prune --older 30d >/dev/null 2>&1 || fail "prune"
[ ! -e "$logs/build-42.jsonl" ] || fail "prune left an old log"
[ -f "$logs/later.jsonl" ] && [ -f "$logs/notes.txt" ] || fail "prune removed too much: $(ls "$logs")"
rc=0
"$AIRLOCK" log prune >/dev/null 2>&1 || rc=$?
expect_eq "prune without --older" 2 "$rc"
echo "ok   log prune --older"
# With --log elsewhere, the default log directory (earlier runs' logs,
# and where --last looks) is still out of CMD's reach: no log planted.
mkdir -p "$dir/wd"
plant='mkdir -p "$XDG_STATE_HOME/airlock" 2>/dev/null; printf "%s\n" "{\"ts\":\"2030-01-01T00:00:00.000Z\",\"task\":\"zzzz\",\"kind\":\"task-start\",\"airlock\":\"0.1.0\",\"pid\":1,\"policy\":\"x\",\"policy_sha256\":\"x\",\"mode\":\"audit\",\"command\":[\"x\"],\"selftest\":\"pass\"}" > "$XDG_STATE_HOME/airlock/zzzz.jsonl" 2>/dev/null && echo planted; true'
out=$(cd "$dir/wd" && XDG_STATE_HOME=$dir/wd/state "$AIRLOCK" run -p "$dir/none.yaml" -q --log "$dir/other.jsonl" -- sh -c "$plant")
mkdir -p "$dir/wd/state/airlock"
out=$(cd "$dir/wd" && XDG_STATE_HOME=$dir/wd/state "$AIRLOCK" run -p "$dir/none.yaml" -q --log "$dir/other.jsonl" -- sh -c "$plant")
[ "$out" != planted ] && [ ! -e "$dir/wd/state/airlock/zzzz.jsonl" ] ||
	fail "CMD planted a log in the default directory while --log was elsewhere"
echo "ok   the default log directory is out of CMD's reach with --log FILE too"

# What airlock prints: libevent's own messages as airlock: lines (its
# EVENT_SHOW_METHOD message, a debug one, shows with -vv), never bare
# "[msg]"/"[warn]"; -vv's timeline counts from the run's start.
err=$( (cd "$dir" && EVENT_SHOW_METHOD=1 "$AIRLOCK" run -p "$dir/none.yaml" -vv -- true) 2>&1 >/dev/null)
! grep -Eq '^\[(msg|warn|err|debug)\]' <<<"$err" || fail "libevent printed bare lines: $(grep -E '^\[' <<<"$err" | head -n 2)"
expect_match "libevent's message as an airlock line" '^airlock: libevent: libevent using: ' "$err"
python3 - <<PY || fail "-vv times are not from the run's start: $(grep -E ' at [0-9.]+ ms' <<<"$err" | head -n 3)"
import re
times = [float(t) for t in re.findall(r" at ([0-9.]+) ms", """$err""")]
assert len(times) >= 5, times
assert max(times) < 60000, times
PY
echo "ok   libevent's lines are airlock's; -vv counts from the start"
echo "logs: all passed"
