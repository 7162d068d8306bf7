#!/usr/bin/env bash
# `airlock log verify` over real logs (docs/log.md, "The hash chain"): runs
# in the lab append to one log, one after the other and two at the same
# time (their lines interleave); the log verifies, and check_log.py, a
# second implementation, agrees. Then the same log with one byte changed,
# a line deleted, the end cut off mid-line, or seq and prev stripped (an
# older log) is reported: the right FILE:LINE and exit 1, or exit 3 for the
# unchained one. As root and, when AIRLOCK_TEST_USER is set, as that user.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

mkdir -p "$LAB_WORK/bin" "$LAB_WORK/policies"
install -m 755 "$AIRLOCK" "$LAB_WORK/bin/airlock"
AIRLOCK=$LAB_WORK/bin/airlock
cp "$SOURCE_ROOT/policies/pypi.yaml" "$LAB_WORK/policies/"
POL=$LAB_WORK/policies/pypi.yaml
# Allowed, denied, allowed: at least five lines per run.
CLIENT='curl -sS -o /dev/null https://pypi.org/simple/;
	curl -sS -o /dev/null https://evil.test/ 2>/dev/null;
	sleep "${1:-0}"; curl -sS -o /dev/null https://pypi.org/simple/; true'

run_as() {
	local role=$1
	shift
	if [ "$role" = user ]; then
		airlock_lab_as "$AIRLOCK_TEST_USER" "$POL" -- sh -c "$CLIENT" sh "$@"
	else
		airlock_lab "$POL" -- sh -c "$CLIENT" sh "$@"
	fi
}

# verify FILE: sets out and rc.
verify() {
	set +e
	out=$("$AIRLOCK" log verify "$1" 2>&1)
	rc=$?
	set -e
}

# The file's line N with its byte at offset OFF replaced by C.
edit_byte() {
	/usr/bin/python3 - "$@" <<-'EOF'
		import sys
		path, n, off, c = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].encode()
		lines = open(path, "rb").read().split(b"\n")
		line = bytearray(lines[n - 1])
		assert line[off:off + 1] != c, (line[off:off + 1], c)
		line[off:off + 1] = c
		lines[n - 1] = bytes(line)
		open(path, "wb").write(b"\n".join(lines))
	EOF
}

roles="root"
[ -n "${AIRLOCK_TEST_USER:-}" ] && id "$AIRLOCK_TEST_USER" >/dev/null 2>&1 && roles="root user"
for role in $roles; do
	rm -f "$LOGF"
	run_as "$role" >/dev/null 2>&1 || fail "$role: the first run failed"
	run_as "$role" >/dev/null 2>&1 || fail "$role: the second run failed"
	# Two at once, appending to the same file.
	run_as "$role" 1 >/dev/null 2>&1 &
	p1=$!
	run_as "$role" 1 >/dev/null 2>&1 &
	p2=$!
	wait "$p1" || fail "$role: a concurrent run failed"
	wait "$p2" || fail "$role: a concurrent run failed"
	n=$(wc -l <"$LOGF")
	[ "$n" -ge 20 ] || fail "$role: only $n lines in the log"
	tasks=$(grep -o '"task":"[^"]*"' "$LOGF" | sort -u | wc -l)
	expect_eq "$role: tasks in the log" 4 "$tasks"

	verify "$LOGF"
	echo "$role: $out"
	expect_eq "$role: verify exit" 0 "$rc"
	expect_match "$role: summary" "^4 chains hold: $n of $n lines chained in 1 file$" "$out"
	/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" --quiet "$LOGF" ||
		fail "$role: check_log.py rejects the log"

	# One byte of line 2 (the first run's first connection): a digit of
	# its ts. Line 3's prev no longer matches, line 4 confirms line 3.
	cp "$LOGF" "$LAB_WORK/edited.jsonl"
	line2=$(sed -n 2p "$LOGF")
	d=${line2:28:1}
	[[ $d =~ [0-9] ]] || fail "$role: line 2's ts is not where expected: $line2"
	edit_byte "$LAB_WORK/edited.jsonl" 2 28 "$(((d + 1) % 10))"
	verify "$LAB_WORK/edited.jsonl"
	echo "$role: edited: $out"
	expect_eq "$role: verify exit, one byte changed" 1 "$rc"
	expect_match "$role: the changed line is named" \
		"^$LAB_WORK/edited.jsonl:2: changed after it was written: line 3's prev" "$out"
	# The other readers still read it (show, summary).
	"$AIRLOCK" log summary "$LAB_WORK/edited.jsonl" >/dev/null 2>&1 ||
		fail "$role: log summary no longer reads the edited log"

	# Line 3 deleted: line 4 (now 3) is out of step.
	sed 3d "$LOGF" >"$LAB_WORK/deleted.jsonl"
	verify "$LAB_WORK/deleted.jsonl"
	expect_eq "$role: verify exit, a line deleted" 1 "$rc"
	expect_match "$role: the gap is named" "^$LAB_WORK/deleted.jsonl:3: seq 3 where 2 was expected" "$out"

	# Cut in the middle of the last line.
	head -c -20 "$LOGF" >"$LAB_WORK/cut.jsonl"
	verify "$LAB_WORK/cut.jsonl"
	expect_eq "$role: verify exit, cut" 1 "$rc"
	expect_match "$role: the cut line is named" "^$LAB_WORK/cut.jsonl:$n: the last line is cut short" "$out"

	# seq and prev stripped, as in a log from before the chain.
	sed -E 's/,"seq":[0-9]+,"prev":"[0-9a-f]{64}"\}$/}/' "$LOGF" >"$LAB_WORK/old.jsonl"
	verify "$LAB_WORK/old.jsonl"
	expect_eq "$role: verify exit, unchained" 3 "$rc"
	expect_match "$role: unchained lines said" "$n lines carry no chain" "$out"
	"$AIRLOCK" log show "$LAB_WORK/old.jsonl" >/dev/null 2>"$LAB_WORK/old.err" ||
		fail "$role: log show does not read the old log"
	[ ! -s "$LAB_WORK/old.err" ] || fail "$role: log show complains: $(cat "$LAB_WORK/old.err")"
done
echo "log verify: ok"
