#!/usr/bin/env bash
# Rough edges of the command line (issue 21): a refused option is one
# 'airlock:' line naming the option and where help is, for every command;
# -V prints the version; policy check counts "1 rule"; policy test takes
# URLs as a user pastes them.
. "$(dirname "$0")/../lib.sh"

# one_line WHAT WANT_IN_LINE CMD...: exit 2 (run: 125, as every failure of
# airlock's own, so that it is not mistaken for CMD's status), stderr
# exactly one line that starts with "airlock:" and contains WANT_IN_LINE;
# stdout empty.
one_line() {
	local what=$1 want=$2 out err rc=0 expect=2
	shift 2
	[ "$2" = run ] && expect=125
	out=$("$@" 2>/tmp/options.$$) || rc=$?
	err=$(cat /tmp/options.$$)
	rm -f /tmp/options.$$
	[ "$rc" = "$expect" ] || fail "$what: exit $rc, expected $expect (stderr: $err)"
	[ -z "$out" ] || fail "$what: printed on stdout: $out"
	[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "$what: more than one line on stderr: $err"
	case $err in airlock:*"$want"*) ;; *) fail "$what: expected one 'airlock:' line with '$want', got: $err" ;; esac
}

for cmd in "run" "proxy" "selftest" "pod-init" "policy check" "policy test" \
	"log show" "log summary" "log suggest" "log replay" "log verify"; do
	# shellcheck disable=SC2086
	one_line "$cmd --bogus" "unknown option '--bogus'; see 'airlock $cmd --help'" \
		"$AIRLOCK" $cmd --bogus=1 x
	# shellcheck disable=SC2086
	one_line "$cmd -Z" "unknown option '-Z'" "$AIRLOCK" $cmd -Z x
done
one_line "run -p without a value" "option '-p' needs a value" "$AIRLOCK" run -p
one_line "proxy --listen without a value" "option '--listen' needs a value" "$AIRLOCK" proxy --listen
one_line "policy check --policy-dir without a value" "option '--policy-dir' needs a value" \
	"$AIRLOCK" policy check --policy-dir
one_line "log show --host without a value" "option '--host' needs a value" "$AIRLOCK" log show --host
one_line "log replay -p without a value" "option '-p' needs a value" "$AIRLOCK" log replay -p
echo "ok   every command refuses a bad option in one airlock: line"

v=$("$AIRLOCK" --version)
expect_eq "-V" "$v" "$("$AIRLOCK" -V)"
case $v in "airlock "[0-9]*) ;; *) fail "--version printed '$v'" ;; esac
echo "ok   -V prints the version"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'version: 1\nallow:\n  - host: a.test\n' >"$dir/one.yaml"
checked=$("$AIRLOCK" policy check "$dir/one.yaml")
grep -q "^  1 rule: 1 allow, 0 deny" <<<"$checked" ||
	fail "policy check does not say '1 rule': $("$AIRLOCK" policy check "$dir/one.yaml")"
echo "ok   policy check says 1 rule"

# policy test with URLs: scheme gives the port, path/query/user info ignored.
printf 'version: 1\nallow:\n  - host: a.test\n    ports: [443]\n  - host: b.test\n    ports: [80, 8080]\n' >"$dir/urls.yaml"
out=$("$AIRLOCK" policy test "$dir/urls.yaml" https://a.test/simple/x/ 'https://u:p@a.test?q#f' \
	http://b.test/ http://b.test:8080/p http://a.test/ https://b.test/) && rc=0 || rc=$?
expect_eq "policy test URLs exit" 1 "$rc"
expect_eq "policy test URLs" "allow a.test:443 $dir/urls.yaml:3
allow a.test:443 $dir/urls.yaml:3
allow b.test:80 $dir/urls.yaml:5
allow b.test:8080 $dir/urls.yaml:5
deny a.test:80 no-rule
deny b.test:443 no-rule" "$out"
one_line "policy test ftp://" "not an http:// or https:// URL" "$AIRLOCK" policy test "$dir/urls.yaml" ftp://a.test/
one_line "policy test https://" "no host in the URL" "$AIRLOCK" policy test "$dir/urls.yaml" https:///x
echo "ok   policy test takes http:// and https:// URLs"
# log show on a pipe that stays open: each line shows as it comes, not
# when a buffer fills or the writer ends.
mkfifo "$dir/live"
"$AIRLOCK" log show --color never "$dir/live" >"$dir/shown" &
show_pid=$!
exec 3>"$dir/live"
sed -n 2p "$SOURCE_ROOT/tests/elog/data/audit-pip.jsonl" >&3
for _ in $(seq 1 50); do
	[ -s "$dir/shown" ] && break
	sleep 0.1
done
shown=$(cat "$dir/shown")
exec 3>&-
wait "$show_pid" || fail "log show on a FIFO exited $?"
[ -n "$shown" ] || fail "log show on a FIFO: nothing shown within 5 s of a line while the writer stayed open"
echo "ok   log show on a FIFO shows a line as it comes"
# log summary: a long name does not push its figures out of their columns.
long=$(printf 'a%.0s' $(seq 1 70)).test
{
	sed -n 1p "$SOURCE_ROOT/tests/elog/data/audit-pip.jsonl"
	printf '{"ts":"2026-11-30T10:24:41.000Z","task":"a1","kind":"connect","host":"%s","ip":"192.0.2.1","port":443,"verdict":"deny","reason":"no-rule","bytes_up":0,"bytes_down":0,"duration_ms":1}\n' "$long"
	printf '{"ts":"2026-11-30T10:24:42.000Z","task":"a1","kind":"connect","host":"short.test","ip":"192.0.2.2","port":443,"verdict":"deny","reason":"no-rule","bytes_up":0,"bytes_down":0,"duration_ms":1}\n'
} >"$dir/long.jsonl"
"$AIRLOCK" log summary "$dir/long.jsonl" >"$dir/summary"
python3 - "$dir/summary" "$long" <<'PY' || fail "log summary columns: $(cat "$dir/summary")"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
head = next(l for l in lines if "ATTEMPTS" in l)
end = head.index("ATTEMPTS") + len("ATTEMPTS")
rows = [l for l in lines if re.search(r"\d{4}-\d\d-\d\d \S+  \d{4}-", l)]
assert len(rows) == 2, rows
for r in rows:
    # the ATTEMPTS figure ends where its heading ends
    m = re.search(r"(\d+)\s+\d+\s+\d+\s+\S+B\s+\S+B\s+\d{4}-", r)
    assert m and m.end(1) == end, (r, end)
assert any(l.strip() == sys.argv[2] + ":443" for l in lines), "the long name is not on a line of its own"
PY
echo "ok   log summary keeps its columns with a 75-character name"
echo "options: all passed"
