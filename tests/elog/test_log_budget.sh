#!/usr/bin/env bash
# The per-task log budget, in the lab (docs/log.md, "The log budget"): a
# tiny --log-budget is spent by queries for many distinct names; from then
# on detail stops and counts go on: destinations the log already names keep
# working (pypi.org over DNS and through the proxy), new ones are refused
# and told why (DNS REFUSED, the proxy's 503), one log-budget line says so,
# and the run still ends with a task-end whose totals count every event;
# the log's hash chain holds (`airlock log verify`).
# As root and, when AIRLOCK_TEST_USER is set, as that user.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start
LC=("/usr/bin/python3" "$TESTS_DIR/elog/logcheck.py")

# The build tree may not be readable by the user: copies in the lab's tree.
mkdir -p "$LAB_WORK/bin" "$LAB_WORK/policies"
install -m 755 "$AIRLOCK" "$LAB_WORK/bin/airlock"
AIRLOCK=$LAB_WORK/bin/airlock
cp "$SOURCE_ROOT/policies/pypi.yaml" "$LAB_WORK/policies/"
install -m 644 "$TESTS_DIR/elog/flood.py" "$LAB_WORK/flood.py"
cat >"$LAB_WORK/inside.sh" <<-'SH'
	w=$1
	q() { /usr/bin/python3 "$w/flood.py" query "$1" --timeout 3; }
	echo "dns-known-before $(q pypi.org)"
	curl -sS -o /dev/null -w 'known-before %{http_code}\n' https://pypi.org/simple/
	/usr/bin/python3 "$w/flood.py" dns-distinct spend --count 300 --seconds 20
	echo "dns-known-after $(q pypi.org)"
	echo "dns-new-after $(q files.pythonhosted.org)"
	curl -sS -o /dev/null -w 'known-after %{http_code}\n' https://pypi.org/simple/
	curl -sS -o /dev/null -w 'new-after %{http_code} %{http_connect}\n' \
		https://files.pythonhosted.org/packages/ 2>&1
	exit 3
SH

BUDGET=4096
roles="root"
[ -n "${AIRLOCK_TEST_USER:-}" ] && id "$AIRLOCK_TEST_USER" >/dev/null 2>&1 && roles="root user"
for role in $roles; do
	rm -f "$LOGF"
	set +e
	if [ "$role" = user ]; then
		out=$(airlock_lab_as "$AIRLOCK_TEST_USER" "$LAB_WORK/policies/pypi.yaml" \
			--log-budget "$BUDGET" -- sh "$LAB_WORK/inside.sh" "$LAB_WORK" 2>&1)
	else
		out=$(airlock_lab "$LAB_WORK/policies/pypi.yaml" --log-budget "$BUDGET" -- \
			sh "$LAB_WORK/inside.sh" "$LAB_WORK" 2>&1)
	fi
	rc=$?
	set -e
	printf '%s\n' "$out" | sed "s/^/$role: /"
	expect_eq "$role: exit status is CMD's" 3 "$rc"
	expect_match "$role: a known name resolves before" 'dns-known-before rcode=NOERROR' "$out"
	expect_match "$role: a known destination works before" 'known-before 200' "$out"
	expect_match "$role: the flood happened" 'dns sent=300 answered=300' "$out"
	expect_match "$role: a known name still resolves" 'dns-known-after rcode=NOERROR' "$out"
	expect_match "$role: a new name is refused" 'dns-new-after rcode=REFUSED' "$out"
	expect_match "$role: a known destination still works" 'known-after 200' "$out"
	expect_match "$role: a new destination gets the proxy's refusal" 'new-after 000 503' "$out"
	expect_match "$role: stderr says the budget is spent" 'log budget .*spent' "$out"

	"${LC[@]}" parse "$LOGF" || fail "$role: the log does not parse"
	/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" --quiet "$LOGF" ||
		fail "$role: the log does not match docs/log.md"
	# The events the budget left without a line leave no gap in the chain;
	# the log-budget line is in it.
	out=$("$AIRLOCK" log verify "$LOGF") || fail "$role: log verify: $out"
	expect_match "$role: log verify" '^1 chain holds: .*; 1 spent the log budget$' "$out"
	echo "$role: log $("${LC[@]}" stat "$LOGF") with --log-budget $BUDGET"
	expect_eq "$role: one log-budget line" 1 "$("${LC[@]}" lines "$LOGF" 'e["kind"] == "log-budget"')"
	expect_eq "$role: task-end last" task-end "$(tail -n 1 "$LOGF" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["kind"])')"
	# Event lines stay within the budget; task-start, task-end and the
	# log-budget line are outside it.
	ev_bytes=$(/usr/bin/python3 -c '
import json, sys
print(sum(len(l) for l in open(sys.argv[1], "rb") if json.loads(l)["kind"] not in ("task-start", "task-end", "log-budget")))' "$LOGF")
	[ "$ev_bytes" -le "$BUDGET" ] || fail "$role: $ev_bytes bytes of event lines, budget $BUDGET"
	# Totals count every event, the unwritten ones included.
	total=$("${LC[@]}" total "$LOGF" connections)
	unlogged=$("${LC[@]}" total "$LOGF" unlogged)
	written=$("${LC[@]}" events "$LOGF" 'e["kind"] not in ("task-start", "task-end", "log-budget")')
	expect_eq "$role: totals = written events + unlogged" "$total" "$((written + unlogged))"
	[ "$total" -ge 306 ] || fail "$role: totals.connections $total, expected every event (>= 306)"
done
echo "log budget: ok"
