#!/usr/bin/env bash
# The learning loop of docs/audit.md, for real, in the test lab: run pip in
# audit mode under the empty policy, suggest a policy from its log, check it,
# replay the audit log against it, then enforce it on the same command (which
# works) and on a new destination (which is denied). Every step uses the
# airlock binary and real clients.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../lab/lib.sh"
lab_start

AUDIT_LOG=$LAB_WORK/audit.jsonl
LEARNED=$LAB_WORK/learned.yaml

# 1. Audit: nothing is allowed by the policy, everything goes through and is
#    logged as audit-deny.
LOGF=$AUDIT_LOG
airlock_lab none --audit -- python3 -m pip install -q --target "$LAB_WORK/site" labpkg ||
	fail "pip install labpkg in audit mode under 'none'"
[ -f "$LAB_WORK/site/labpkg/__init__.py" ] || fail "audit run: labpkg not installed"
expect_logged "audit: task-start says audit" 'e["kind"] == "task-start" and e.get("mode") == "audit"'
expect_logged "audit: pypi.org audit-deny" 'e.get("host") == "pypi.org" and e.get("verdict") == "audit-deny"'
expect_logged "audit: files.pythonhosted.org audit-deny" \
	'e.get("host") == "files.pythonhosted.org" and e.get("verdict") == "audit-deny"'

# 2. Suggest, and the result is a valid policy.
"$AIRLOCK" log suggest --name learned "$AUDIT_LOG" >"$LEARNED" 2>"$LAB_WORK/suggest.err" ||
	fail "log suggest: $(cat "$LAB_WORK/suggest.err")"
"$AIRLOCK" policy check "$LEARNED" >"$LAB_WORK/check.out" 2>&1 ||
	fail "the suggested policy does not pass policy check: $(cat "$LAB_WORK/check.out")"
grep -Eq '^  - host: pypi\.org$' "$LEARNED" || fail "no pypi.org rule in: $(cat "$LEARNED")"
grep -Eq '^  - host: files\.pythonhosted\.org$' "$LEARNED" ||
	fail "no files.pythonhosted.org rule in: $(cat "$LEARNED")"
if grep -q 'evil.test' "$LEARNED"; then fail "evil.test was never attempted, yet suggested"; fi

# 3. Replay: under the learned policy every audit-deny becomes an allow and
#    nothing is denied; exit 1 because something changes.
set +e
"$AIRLOCK" log replay -p "$LEARNED" "$AUDIT_LOG" >"$LAB_WORK/replay.out" 2>&1
rc=$?
set -e
expect_eq "replay of the audit log: exit" 1 "$rc"
expect_match "replay: nothing newly denied" ' 0 would now be denied' "$(cat "$LAB_WORK/replay.out")"
expect_match "replay: pypi.org now allowed" 'pypi\.org:443 .*now: .*learned\.yaml:' "$(cat "$LAB_WORK/replay.out")"

# 4. Enforce the learned policy on the same command: it works, by its rules.
LOGF=$LAB_WORK/enforce.jsonl
airlock_lab "$LEARNED" -- python3 -m pip install -q --target "$LAB_WORK/site2" labpkg ||
	fail "pip install labpkg under the suggested policy: $(tail -n 20 "$LOGF")"
expect_eq "labpkg imports" "hello from labpkg" \
	"$(PYTHONPATH="$LAB_WORK/site2" /usr/bin/python3 -c 'import labpkg; print(labpkg.hello())')"
expect_logged "enforce: pypi.org allowed by the learned rule" \
	'e.get("host") == "pypi.org" and e.get("verdict") == "allow" and "learned.yaml:" in e.get("rule", "")'
[ "$(log_count 'e.get("verdict") in ("deny", "audit-deny")')" = 0 ] ||
	fail "the same command had denials under its own suggested policy: $(grep -E '"deny"' "$LOGF" | head -n 3)"

# 5. A destination the audit run never needed is denied.
if airlock_lab "$LEARNED" -- curl -sSf -o /dev/null https://registry.npmjs.org/ 2>/dev/null; then
	fail "registry.npmjs.org was reachable under the learned policy"
fi
expect_logged "enforce: registry.npmjs.org denied" \
	'e.get("host") == "registry.npmjs.org" and e.get("verdict") == "deny"'

# 6. Review the enforce log: the denial shows up, summary is JSON, and the
#    learned policy replayed on its own log changes nothing.
out=$("$AIRLOCK" log show --denied "$LOGF") || fail "log show --denied"
expect_match "show --denied" 'deny +[a-z]+ +registry\.npmjs\.org:443' "$out"
"$AIRLOCK" log summary --json "$LOGF" | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
d = {x["destination"]: x for x in s["destinations"]}
assert d["registry.npmjs.org:443"]["denied"] >= 1, d
assert d["pypi.org:443"]["allowed"] >= 1, d
assert len(s["tasks"]) == 2, s["tasks"]
' || fail "log summary --json"
"$AIRLOCK" log replay -p "$LEARNED" "$LOGF" >"$LAB_WORK/replay2.out" 2>&1 ||
	fail "replaying the enforce log under its own policy changed something: $(cat "$LAB_WORK/replay2.out")"
echo "audit loop: ok"

# 7. Rootless (AIRLOCK_TEST_USER, which CI sets): the same loop as an
#    ordinary user, who also runs suggest on their own log.
if [ -n "${AIRLOCK_TEST_USER:-}" ] && id "$AIRLOCK_TEST_USER" >/dev/null 2>&1; then
	user=$AIRLOCK_TEST_USER
	# The build tree may not be readable by the user: a copy of the binary.
	mkdir -p "$LAB_WORK/bin"
	install -m 755 "$AIRLOCK" "$LAB_WORK/bin/airlock"
	AIRLOCK=$LAB_WORK/bin/airlock
	LOGF=$LAB_WORK/audit-user.jsonl
	airlock_lab_as "$user" none --audit -- python3 -m pip install -q --target "$LAB_WORK/site3" labpkg ||
		fail "rootless: pip install labpkg in audit mode"
	in_lab_as "$user" "$AIRLOCK" log suggest --name learned-user "$LOGF" >"$LAB_WORK/learned-user.yaml" ||
		fail "rootless: log suggest"
	chown "$user:" "$LAB_WORK/learned-user.yaml"
	LOGF=$LAB_WORK/enforce-user.jsonl
	airlock_lab_as "$user" "$LAB_WORK/learned-user.yaml" -- python3 -m pip install -q --target "$LAB_WORK/site4" labpkg ||
		fail "rootless: pip install under the suggested policy: $(tail -n 5 "$LOGF")"
	expect_logged "rootless: pypi.org allowed by the learned rule" \
		'e.get("host") == "pypi.org" and e.get("verdict") == "allow" and "learned-user.yaml:" in e.get("rule", "")'
	if airlock_lab_as "$user" "$LAB_WORK/learned-user.yaml" -- curl -sSf -o /dev/null https://registry.npmjs.org/ 2>/dev/null; then
		fail "rootless: registry.npmjs.org was reachable under the learned policy"
	fi
	echo "audit loop (rootless as $user): ok"
fi
