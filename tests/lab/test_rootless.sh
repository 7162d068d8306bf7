#!/usr/bin/env bash
# Rootless: the same install and exfiltration story as an ordinary user
# (AIRLOCK_TEST_USER) running airlock inside the lab's client namespace.
# Root only builds the lab and drops to the user for the airlock runs.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
need_prog setpriv nc timeout
[ -n "${AIRLOCK_TEST_USER:-}" ] ||
	skip "AIRLOCK_TEST_USER is not set (names the unprivileged account for rootless runs; .ci/run sets it)"
id "$AIRLOCK_TEST_USER" >/dev/null 2>&1 || skip "AIRLOCK_TEST_USER=$AIRLOCK_TEST_USER: no such user"
lab_start

# The build tree may not be readable by the user (a checkout under /root):
# a copy of the binary and the presets in the lab's work tree always is.
mkdir -p "$LAB_WORK/bin" "$LAB_WORK/policies"
install -m 755 "$AIRLOCK" "$LAB_WORK/bin/airlock"
cp "$SOURCE_ROOT/policies/pypi.yaml" "$LAB_WORK/policies/"
cp "$TESTS_DIR/lab/attempts.sh" "$LAB_WORK/attempts.sh"
AIRLOCK=$LAB_WORK/bin/airlock
user=$AIRLOCK_TEST_USER

airlock_lab_as "$user" "$LAB_WORK/policies/pypi.yaml" -- \
	python3 -m pip install -q --target "$LAB_WORK/site" labpkg ||
	fail "rootless: pip install labpkg under the pypi preset"
expect_eq "labpkg imports" "hello from labpkg" \
	"$(PYTHONPATH="$LAB_WORK/site" /usr/bin/python3 -c 'import labpkg; print(labpkg.hello())')"
expect_eq "the installed files belong to the user" "$user" "$(stat -c %U "$LAB_WORK/site/labpkg/__init__.py")"

res=$LAB_WORK/results
airlock_lab_as "$user" "$LAB_WORK/policies/pypi.yaml" -- sh "$LAB_WORK/attempts.sh" "$res" exfil ||
	fail "rootless: airlock run of the attempts failed"
expect_eq "control: pypi.org" "0" "$(awk '$1 == "control-pypi" { print $2 }' "$res")"
for name in curl-proxy-https curl-noproxy-https curl-direct-ip curl-direct-ip6 python-urllib \
	curl-proxy-loopback curl-metadata dig-txt dig-txt-lab-resolver; do
	rc=$(awk -v n="$name" '$1 == n { print $2 }' "$res")
	[ -n "$rc" ] && [ "$rc" != 0 ] || fail "rootless: attempt $name: status '${rc:-missing}'"
done
expect_canaries_silent "rootless"
expect_dns_never_saw "rootless" 'evil'

# The supervisor ran as the user: it wrote the log, and named the task.
expect_eq "log owner" "$user" "$(stat -c %U "$LOGF")"
expect_logged "rootless: pypi.org allowed" "e.get('host') == 'pypi.org' and e['verdict'] == 'allow'"
expect_logged "rootless: evil.test denied" "e.get('host', '').lower() == 'evil.test' and e['verdict'] == 'deny'"
expect_logged "rootless: UDP blocked" "e['kind'] == 'packet' and e.get('ip') == '$LAB_EVIL_V4'"
/usr/bin/python3 "$TESTS_DIR/lab/check_log.py" "$LOGF" || fail "the egress log does not match docs/log.md"
echo "rootless: install works and exfiltration is blocked and logged as $user"
