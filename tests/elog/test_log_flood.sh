#!/usr/bin/env bash
# The log's volume under floods from inside `airlock run` (docs/log.md,
# "Repeated events"): 50,000 DNS queries for one name and for a few names,
# and thousands of refused connections to one destination, transparent and
# through the explicit proxy. Repeats are counted, not written one by one:
# the log grows by at most one line per distinct event per second (plus the
# first of each and the last count), and still accounts for every event: the lines' counts
# add up to what the clients were answered, and task-end's totals to the
# lines' counts. Prints the log's growth for each flood. Both roles.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/sandbox/common.sh"
need_prog timeout
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is not installed"
sbx_setup
LC=("/usr/bin/python3" "$TESTS_DIR/elog/logcheck.py")

# check ROLE WHAT KEYS SECONDS OUT EXPR: the log has at most KEYS lines per
# second of the run plus KEYS first lines, task-start and task-end; the
# events of the flood (EXPR) are at least what the client saw answered.
check() {
	local role=$1 what=$2 keys=$3 secs=$4 out=$5 expr=$6 log lines max answered events all total
	log=$(logf "$role")
	"${LC[@]}" parse "$log" || fail "$role $what: the log does not parse"
	/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" --quiet "$log" ||
		fail "$role $what: the log does not match docs/log.md"
	lines=$("${LC[@]}" lines "$log" 'True')
	echo "$role $what: $out; log $("${LC[@]}" stat "$log") in ${secs}s"
	max=$((keys * (secs + 2) + 2))
	[ "$lines" -le "$max" ] || fail "$role $what: $lines log lines, expected at most $max"
	answered=$(sed -nE 's/.*(answered|tries)=([0-9]+).*/\2/p' <<<"$out")
	[ "${answered:-0}" -ge 1000 ] || fail "$role $what: the flood did not happen: $out"
	events=$("${LC[@]}" events "$log" "$expr")
	[ "$events" -ge "$answered" ] ||
		fail "$role $what: the log's lines stand for $events events, the client saw $answered"
	all=$("${LC[@]}" events "$log" 'e["kind"] not in ("task-start", "task-end")')
	total=$("${LC[@]}" total "$log" connections)
	expect_eq "$role $what: task-end totals.connections = the lines' counts" "$all" "$total"
}

# run ROLE ARGS...: airlock run on a fresh log; sets OUT and SECS.
run() {
	local role=$1 t0
	shift
	rm -f "$(logf "$role")"
	t0=$(date +%s%N)
	OUT=$(al "$role" --timeout 60 -- /usr/bin/python3 "$(work "$role")/flood.py" "$@" 2>&1) ||
		fail "$role: airlock run $*: $OUT"
	# Whole seconds, rounded up: the windows the run can have spanned.
	SECS=$((($(date +%s%N) - t0 + 999999999) / 1000000000))
}

for role in $ROLES; do
	cp "$TESTS_DIR/elog/flood.py" "$(work "$role")/flood.py"
	chmod 644 "$(work "$role")/flood.py"

	run "$role" dns --count 50000 --seconds 20 same.evil.test
	check "$role" "dns flood, one name" 1 "$SECS" "$OUT" \
		'e["kind"] == "dns" and e.get("host") == "same.evil.test"'

	run "$role" dns --count 50000 --seconds 20 a.evil.test b.evil.test c.evil.test d.evil.test
	check "$role" "dns flood, four names" 4 "$SECS" "$OUT" \
		'e["kind"] == "dns" and e.get("host", "").endswith(".evil.test")'

	# Bounded in time rather than count: several windows close during it.
	run "$role" dns --count 10000000 --seconds 3 same.evil.test a.evil.test
	check "$role" "dns flood for 3 s, two names" 2 "$SECS" "$OUT" \
		'e["kind"] == "dns" and e.get("host", "").endswith(".evil.test")'

	run "$role" connect 203.0.113.66 443 --count 3000 --seconds 20
	check "$role" "refusal flood, transparent" 1 "$SECS" "$OUT" \
		'e["kind"] == "tcp" and e.get("ip") == "203.0.113.66" and e.get("verdict") == "deny"'

	run "$role" proxy evil.test:443 --count 3000 --seconds 20
	check "$role" "refusal flood, explicit proxy" 1 "$SECS" "$OUT" \
		'e["kind"] == "connect" and e.get("host") == "evil.test" and e.get("verdict") == "deny"'
	expect_match "$role: the proxy refused with 403" "'403': [0-9]+" "$OUT"
done
echo "log flood: ok"
