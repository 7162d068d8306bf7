#!/usr/bin/env bash
# `airlock policy check` and `airlock policy test`: output format, exit
# statuses (0 allowed/valid, 1 denied/invalid, 2 usage), --help.
. "$(dirname "$0")/../lib.sh"
scratch_dir

cat >"$SCRATCH/p.yaml" <<'Y'
version: 1
mode: audit
allow:
  - host: pypi.org
  - host: "*.pythonhosted.org"
    ports: [443]
  - cidr: 203.0.113.0/24
    ports: [22]
  - cidr: 2001:db8::/32
  - host: pastebin.com
deny:
  - host: upload.pypi.org
Y

# --help everywhere, exit 0, on stdout
for args in "policy --help" "policy check --help" "policy test --help"; do
	out=$("$AIRLOCK" $args) || fail "airlock $args: exit $?"
	expect_match "airlock $args" '^usage: airlock policy' "$out"
done

# usage errors: exit 2
st=0; "$AIRLOCK" policy 2>/dev/null || st=$?; expect_eq "policy without subcommand" 2 "$st"
st=0; "$AIRLOCK" policy frob 2>/dev/null || st=$?; expect_eq "unknown subcommand" 2 "$st"
st=0; "$AIRLOCK" policy check 2>/dev/null || st=$?; expect_eq "check without FILE" 2 "$st"
st=0; "$AIRLOCK" policy check --bogus x 2>/dev/null || st=$?; expect_eq "check --bogus" 2 "$st"
st=0; "$AIRLOCK" policy test "$SCRATCH/p.yaml" 2>/dev/null || st=$?; expect_eq "test without HOST" 2 "$st"
st=0; "$AIRLOCK" policy test "$SCRATCH/p.yaml" pypi.org:99999 2>/dev/null || st=$?
expect_eq "test with a bad port" 2 "$st"
st=0; "$AIRLOCK" policy test "$SCRATCH/p.yaml" '[2001:db8::1' 2>/dev/null || st=$?
expect_eq "test with a bad [v6]" 2 "$st"

# check: valid, summary with mode, rules and the sink warning
out=$("$AIRLOCK" policy check "$SCRATCH/p.yaml") || fail "check of a valid policy: exit $?"
expect_match "check says valid" "^$SCRATCH/p.yaml: valid" "$out"
expect_match "check shows the mode" 'mode audit' "$out"
expect_match "check shows a rule" "allow \*\.pythonhosted\.org ports 443 \(subdomains only\)  \($SCRATCH/p.yaml:5\)" "$out"
expect_match "check warns about the paste site" "warning: $SCRATCH/p.yaml:10: allows pastebin.com:443, a paste site" "$out"

# check: invalid, the error on stderr with file:line:column, exit 1
printf 'version: 1\nallow:\n  - host: 10.0.0.1\n' >"$SCRATCH/bad.yaml"
st=0; out=$("$AIRLOCK" policy check "$SCRATCH/bad.yaml" 2>"$SCRATCH/err") || st=$?
expect_eq "check of an invalid policy" 1 "$st"
expect_match "invalid summary" "^$SCRATCH/bad.yaml: invalid \(1 error\)" "$out"
expect_eq "error text" "$SCRATCH/bad.yaml:3:11: host: '10.0.0.1' is an IP address; IP literals only match cidr rules: write \`cidr: 10.0.0.1/32\`" "$(cat "$SCRATCH/err")"

# several files: one bad makes the exit 1, the good one is still checked
st=0; out=$("$AIRLOCK" policy check "$SCRATCH/p.yaml" "$SCRATCH/bad.yaml" 2>/dev/null) || st=$?
expect_eq "check of good+bad" 1 "$st"
expect_match "good one reported" "$SCRATCH/p.yaml: valid" "$out"

# test: one line per destination, allow/deny first, then the rule and/or
# the log's reason token
out=$("$AIRLOCK" policy test "$SCRATCH/p.yaml" pypi.org files.pythonhosted.org:443 203.0.113.9:22 \
	'[2001:db8::5]:80' PyPI.org.) || fail "all-allowed test: exit $?"
expect_eq "allowed lines" "allow pypi.org:443 $SCRATCH/p.yaml:4
allow files.pythonhosted.org:443 $SCRATCH/p.yaml:5
allow 203.0.113.9:22 $SCRATCH/p.yaml:7
allow [2001:db8::5]:80 $SCRATCH/p.yaml:9
allow pypi.org:443 $SCRATCH/p.yaml:4" "$out"

st=0; out=$("$AIRLOCK" policy test "$SCRATCH/p.yaml" pypi.org:8080 upload.pypi.org evil.test:80 \
	pythonhosted.org 203.0.113.9 '[2001:db9::1]:443' 'bücher.de') || st=$?
expect_eq "a denial exits 1" 1 "$st"
expect_eq "denied lines" "deny pypi.org:8080 no-rule
deny upload.pypi.org:443 $SCRATCH/p.yaml:12 denied-by-rule
deny evil.test:80 no-rule
deny pythonhosted.org:443 no-rule
deny 203.0.113.9:443 no-rule
deny [2001:db9::1]:443 no-rule
deny bücher.de bad-name: non-ASCII name; write it as punycode (xn--...)" "$out"

# test against an invalid policy: exit 1 and the errors
st=0; "$AIRLOCK" policy test "$SCRATCH/bad.yaml" pypi.org >/dev/null 2>&1 || st=$?
expect_eq "test with an invalid policy" 1 "$st"

# preset names resolve through AIRLOCK_POLICY_DIR / --policy-dir
mkdir "$SCRATCH/presets"
printf 'version: 1\nallow:\n  - host: only.test\n' >"$SCRATCH/presets/mine.yaml"
out=$("$AIRLOCK" policy test --policy-dir "$SCRATCH/presets" mine only.test) || fail "preset by name: exit $?"
expect_eq "preset by --policy-dir" "allow only.test:443 $SCRATCH/presets/mine.yaml:3" "$out"

# inspect: is checked and described, and refused by run and proxy until it
# is served (docs/policy.md, "Inspection"), never run as a plain tunnel
cat >"$SCRATCH/insp.yaml" <<'Y'
version: 1
allow:
  - host: origin.lab
    ports: [443]
    inspect: {http: {access: read-only}}
Y
out=$("$AIRLOCK" policy check "$SCRATCH/insp.yaml") || fail "check of an inspect policy: exit $?"
expect_match "check shows inspect" 'allow origin.lab ports 443 inspect: http' "$out"
st=0; err=$("$AIRLOCK" run -p "$SCRATCH/insp.yaml" -- /bin/true 2>&1) || st=$?
expect_eq "run with inspect: refused" 125 "$st"
expect_match "run says why" 'does not serve TLS inspection yet' "$err"
st=0; err=$("$AIRLOCK" proxy -p "$SCRATCH/insp.yaml" --listen 127.0.0.1:9 --log "$SCRATCH/l.jsonl" 2>&1) || st=$?
expect_eq "proxy with inspect: refused" 1 "$st"
expect_match "proxy says why" 'does not serve TLS inspection yet' "$err"

# test: a URL on an inspected rule has its canonical path decided too
cat >"$SCRATCH/insp2.yaml" <<'Y'
version: 1
allow:
  - host: origin.lab
    ports: [443]
    inspect:
      http:
        access: read-only
        deny:
          - {methods: ["*"], path: "/**/git-receive-pack"}
  - host: plain.lab
Y
out=$("$AIRLOCK" policy test "$SCRATCH/insp2.yaml" 'https://origin.lab/org/r/info/refs?service=x' https://plain.lab/x origin.lab) ||
	fail "test of allowed URLs: exit $?"
expect_eq "test: inspected URL, plain URL, host" "allow origin.lab:443 $SCRATCH/insp2.yaml:3
  inspect GET /org/r/info/refs: allow $SCRATCH/insp2.yaml:7
allow plain.lab:443 $SCRATCH/insp2.yaml:10
allow origin.lab:443 $SCRATCH/insp2.yaml:3" "$out"
st=0; out=$("$AIRLOCK" policy test -X POST "$SCRATCH/insp2.yaml" https://origin.lab/org/r/x/%2e%2e/git-receive-pack) || st=$?
expect_eq "test: refused request exit" 1 "$st"
expect_eq "test: refused on the canonical path" "allow origin.lab:443 $SCRATCH/insp2.yaml:3
  inspect POST /org/r/git-receive-pack: deny $SCRATCH/insp2.yaml:9 request-denied" "$out"
st=0; out=$("$AIRLOCK" policy test --method PUT "$SCRATCH/insp2.yaml" https://origin.lab/) || st=$?
expect_eq "test: method outside access" "1 allow origin.lab:443 $SCRATCH/insp2.yaml:3
  inspect PUT /: deny request-denied" "$st $out"
st=0; "$AIRLOCK" policy test -X get "$SCRATCH/insp2.yaml" https://origin.lab/ 2>/dev/null || st=$?
expect_eq "test: bad --method" 2 "$st"
st=0; "$AIRLOCK" policy check -X GET "$SCRATCH/insp2.yaml" 2>/dev/null || st=$?
expect_eq "check: --method is for test" 2 "$st"
echo "policy cli: ok"
