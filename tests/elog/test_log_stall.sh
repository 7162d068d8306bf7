#!/usr/bin/env bash
# A log reader that stays alive but stops reading (docs/log.md, "When the
# log fails"): the log is a FIFO whose reader sleeps. Writing the log never
# blocks the supervisor's loop; once the pipe is full and nothing has been
# read for a second, the log counts as failed, like a reader that left:
#  - airlock run: DNS answers REFUSED within about a second (not a hang),
#    --timeout 5 fires on time, the run exits 125 saying why;
#  - airlock proxy: CONNECT gets 503 within about a second, SIGTERM ends
#    it at once, exit 1 saying why.
# Both roles.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/sandbox/common.sh"
need_prog timeout mkfifo
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is not installed"
sbx_setup

val() { sed -nE "s/.*$1=([0-9]+).*/\\1/p" <<<"$2" | head -n 1; }

for role in $ROLES; do
	w=$(work "$role")
	install -m 644 "$TESTS_DIR/elog/flood.py" "$w/flood.py"
	install -m 755 "$TESTS_DIR/elog/stall.sh" "$w/stall.sh"
	[ "$role" = user ] && chown "$AIRLOCK_TEST_USER:" "$w"

	out=$(cd "$w" && as "$role" bash "$w/stall.sh" run "$SCRATCH/airlock" "$SCRATCH/none.yaml" "$w")
	printf '%s\n' "$out" | sed "s/^/$role run: /"
	expect_match "$role run: DNS is refused once the log is stalled" 'probe rcode=REFUSED' "$out"
	after=$(val after_ms "$(grep '^out: probe' <<<"$out")")
	[ "${after:-9999}" -le 1500 ] || fail "$role run: refused only after ${after:-?} ms of probing"
	expect_match "$role run: the proxy refuses with 503" "out: proxy tries=1 statuses=\\{'503': 1\\}" "$out"
	elapsed=$(val elapsed_ms "$out")
	[ "$elapsed" -le 7500 ] || fail "$role run: --timeout 5 ended the run after $elapsed ms"
	expect_eq "$role run: exit status" 125 "$(val rc "$out")"
	expect_match "$role run: stderr says the log failed" 'err: airlock(\[worker\])?: .*egress log .*failed' "$out"

	out=$(cd "$w" && as "$role" bash "$w/stall.sh" proxy "$SCRATCH/airlock" "$SCRATCH/none.yaml" "$w")
	printf '%s\n' "$out" | sed "s/^/$role proxy: /"
	after=$(val after_ms "$(grep '^probe' <<<"$out")")
	expect_match "$role proxy: CONNECT refused with 503 once the log is stalled" "probe proxy tries=1 statuses=\\{'503': 1\\}" "$out"
	[ "${after:-9999}" -le 1500 ] || fail "$role proxy: refused only after ${after:-?} ms of probing"
	term=$(val term_ms "$out")
	[ "$term" -le 2000 ] || fail "$role proxy: SIGTERM took $term ms"
	expect_eq "$role proxy: exit status" 1 "$(val rc "$out")"
	expect_match "$role proxy: stderr says the log failed" 'err: airlock proxy: .*egress log .*failed' "$out"
done
echo "log stall: ok"
