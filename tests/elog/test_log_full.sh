#!/usr/bin/env bash
# The egress log on a full disk (docs/log.md, "When the log fails"): a
# 1 MiB tmpfs in a private mount namespace, nearly full. A write that does
# not fit never leaves a partial line: every line of the file parses, also
# after a later run appended to it; and a run whose log failed exits with
# the documented status and says so on stderr, whatever CMD returned
# (airlock run: 125; airlock proxy: 1). As root and, when AIRLOCK_TEST_USER
# is set, as that user.
. "$(dirname "$0")/../lib.sh"
need_root
need_prog unshare mount setpriv
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is not installed"
scratch_dir
LC=("/usr/bin/python3" "$TESTS_DIR/elog/logcheck.py")
cp "$AIRLOCK" "$SCRATCH/airlock"
chmod 755 "$SCRATCH/airlock"
printf 'version: 1\nname: none\ndescription: allows nothing\n' >"$SCRATCH/none.yaml"
chmod 644 "$SCRATCH/none.yaml"

users=("")
[ -n "${AIRLOCK_TEST_USER:-}" ] && id "$AIRLOCK_TEST_USER" >/dev/null 2>&1 && users+=("$AIRLOCK_TEST_USER")
for user in "${users[@]}"; do
	role=${user:-root}
	out=$SCRATCH/out-$role
	mkdir -p "$out" "$SCRATCH/disk-$role"
	install -m 644 "$TESTS_DIR/elog/flood.py" "$out/flood.py"
	[ -n "$user" ] && chown "$user:" "$out"
	facts=$(unshare -m --propagation private -- bash "$TESTS_DIR/elog/full.sh" \
		"$SCRATCH/airlock" "$SCRATCH/none.yaml" "$SCRATCH/disk-$role" "$out" "$user")
	printf '%s\n' "$facts" | sed "s/^/$role: /"

	expect_match "$role: the flood ran" 'run out: dns sent=' "$facts"
	echo "$role: run log on the full disk: $("${LC[@]}" stat "$out/run-full.jsonl")"
	"${LC[@]}" parse "$out/run-full.jsonl" || fail "$role: a partial line in the full log"
	expect_eq "$role: airlock run whose log failed: exit" 125 "$(sed -nE 's/^run rc=([0-9]+)$/\1/p' <<<"$facts")"
	expect_match "$role: airlock run says the log failed" 'run err: airlock(\[worker\])?: .*egress log .*failed' "$facts"
	"${LC[@]}" parse "$out/run-again.jsonl" || fail "$role: the next run's lines are corrupted"
	expect_eq "$role: the next run succeeds" 0 "$(sed -nE 's/^again rc=([0-9]+)$/\1/p' <<<"$facts")"
	expect_eq "$role: the next run's task-start and task-end follow" 2 \
		"$(($("${LC[@]}" lines "$out/run-again.jsonl" 'e["kind"] in ("task-start", "task-end")') - \
			$("${LC[@]}" lines "$out/run-full.jsonl" 'e["kind"] in ("task-start", "task-end")')))"

	echo "$role: proxy log on the full disk: $("${LC[@]}" stat "$out/proxy-full.jsonl")"
	"${LC[@]}" parse "$out/proxy-full.jsonl" || fail "$role: a partial line in the proxy's full log"
	expect_eq "$role: airlock proxy whose log failed: exit" 1 "$(sed -nE 's/^proxy rc=([0-9]+)$/\1/p' <<<"$facts")"
	expect_match "$role: airlock proxy says the log failed" 'proxy err: airlock proxy: .*egress log .*failed' "$facts"
done
echo "log full: ok"
