#!/usr/bin/env bash
# A refused user namespace explained in one line (sandbox/diagnose.c): airlock
# inside airlock is under a seccomp filter that refuses CLONE_NEWUSER, as a
# container runtime's default profile does. The inner run must exit 125
# with the seccomp diagnosis and nothing else; the inner selftest must
# print it as its FAIL line.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv
sbx_setup

for role in $ROLES; do
	# Inside, only the workdir of the host's /tmp is seen.
	cp "$SCRATCH/airlock" "$(work "$role")/airlock"
	cp "$SCRATCH/none.yaml" "$(work "$role")/none.yaml"
	chmod 755 "$(work "$role")/airlock"
	rc=0
	out=$(al "$role" -- ./airlock run -p ./none.yaml -- echo INNER-RAN 2>&1) || rc=$?
	expect_eq "$role: nested run exit" 125 "$rc"
	case "$out" in *INNER-RAN*) fail "$role: the inner command ran" ;; esac
	expect_eq "$role: one line" 1 "$(grep -c . <<<"$out")"
	expect_match "$role: seccomp named" "^airlock: cannot create the sandbox's namespaces: clone: Operation not permitted; a seccomp filter is applied \(Seccomp: 2 in /proc/self/status\): already sandboxed or a container runtime's seccomp profile" "$out"
	rc=0
	out=$(al "$role" -- ./airlock selftest 2>&1) || rc=$?
	expect_eq "$role: nested selftest exit" 1 "$rc"
	expect_match "$role: selftest FAIL line" "^FAIL user namespace: cannot create the sandbox's namespaces: clone: Operation not permitted; a seccomp filter is applied" "$out"
done
echo "ok: diagnose ($ROLES)"
