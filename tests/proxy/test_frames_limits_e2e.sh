#!/usr/bin/env bash
# Where request framing (h1frame.h, bind.c) meets audit mode and the log
# budget, through `airlock run` in the test lab; frames_origin.py serves
# 203.0.113.66:8082 and logs the Host of every request it reads, as in
# test_frames_e2e.sh.
#  - Audit mode: after a request that cannot be framed, the rest of the
#    connection goes unframed, unchecked and unlogged; its audit-deny line
#    must say so, also when an earlier refusal gave the line its reason.
#  - The log budget: on an address a cidr rule let through without a name,
#    a Host the policy allows is a new destination; once the budget is
#    spent it is refused (docs/log.md), as it is when it comes first.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

ORIGIN_LOG=$LAB_LOG/frames-origin.log
: >"$ORIGIN_LOG"
"$LAB_SH" inet "$LAB" "$LAB_PYTHON" "$SOURCE_ROOT/tests/proxy/frames_origin.py" 8082 "$ORIGIN_LOG" \
	>"$LAB_LOG/frames-origin.out" 2>&1 &
for _ in $(seq 100); do grep -q ready "$LAB_LOG/frames-origin.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$LAB_LOG/frames-origin.out" || fail "the origin did not start: $(cat "$LAB_LOG/frames-origin.out")"

lab_script "$SOURCE_ROOT/tests/proxy/names.py" >/dev/null
PROBE=$(lab_script "$SOURCE_ROOT/tests/proxy/frames.py")
FLOOD=$(lab_script "$TESTS_DIR/elog/flood.py")
bad=0
expect_probe() { # NAME passed|refused
	if ! grep -Eq -- "^$1 $2( |\$)" <<<"$out"; then
		echo "FAIL: $1: expected '$2'; got: $(grep -E "^$1 " <<<"$out" || echo nothing)" >&2
		bad=1
	fi
}

# ---- audit mode ----
POL=$LAB_WORK/frames-audit.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: frames-audit-e2e
	mode: audit
	allow:
	  - host: evil.test
	    ports: [8082]
	deny:
	  - host: secret.evil.test
YAML
rm -f "$LOGF"
out=$(airlock_lab "$POL" -- sh -c "unset HTTP_PROXY http_proxy; python3 '$PROBE' audit" 2>&1) || true
printf '%s\n' "$out" | grep -E '^[a-z0-9-]+ (passed|refused|error)' || true
! grep -q Sanitizer <<<"$out" || fail "sanitizer report: $out"
! grep -Eq '^audit-[a-z-]+ error' <<<"$out" || fail "an audit probe could not run: $out"
unframed='"request 2" in e.get("detail", "") and "rest of the connection goes unframed" in e.get("detail", "")'
expect_logged "audit: the first refusal on a connection is a framing one: the rest goes unframed" \
	"e.get(\"port\") == 8082 and e.get(\"verdict\") == \"audit-deny\" and $unframed"
expect_logged "audit: a framing refusal after a name-changed one is said on the line too" \
	"e.get(\"port\") == 8082 and e.get(\"verdict\") == \"audit-deny\" and e.get(\"reason\") == \"name-changed\" and \"secret.evil.test\" in e.get(\"detail\", \"\") and \"then request 3\" in e.get(\"detail\", \"\") and \"rest of the connection goes unframed\" in e.get(\"detail\", \"\")"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"

# ---- the log budget ----
POL=$LAB_WORK/frames-budget.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: frames-budget-e2e
	allow:
	  - cidr: 203.0.113.66/32
	    ports: [8082]
	  - host: evil.test
	    ports: [8082]
YAML
cat >"$LAB_WORK/budget.sh" <<-SH
	unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
	python3 "$PROBE" budget-before
	python3 "$FLOOD" dns-distinct spend --count 300 --seconds 20
	python3 "$PROBE" budget-after
SH
rm -f "$LOGF"
out=$(airlock_lab "$POL" --log-budget 4096 -- sh "$LAB_WORK/budget.sh" 2>&1) || true
printf '%s\n' "$out" | grep -E '^[a-z0-9-]+ (passed|refused|error)|^dns ' || true
! grep -q Sanitizer <<<"$out" || fail "sanitizer report: $out"
expect_match "the flood happened" 'dns sent=300 answered=300' "$out"
expect_match "stderr says the budget is spent" 'log budget .*spent' "$out"
expect_probe budget-before-address passed
expect_probe budget-after-address passed
expect_probe budget-after-name refused
[ "$bad" = 0 ] || fail "probes above"
grep -q 'target=/budget-after-address' "$ORIGIN_LOG" ||
	fail "the address admitted before the budget ran out was not served after; the control proved nothing"
if grep 'target=/budget-after-name' "$ORIGIN_LOG"; then
	fail "a name never admitted reached the origin after the log budget was spent (line above)"
fi
echo "ok"
