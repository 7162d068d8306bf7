#!/usr/bin/env bash
# airlock in a container-like process (tests/sandbox/container.py: a
# runtime's seccomp profile as runc/crun apply it, no capabilities,
# no_new_privs). Under containers-common's default profile the run exits
# 125 naming the profile; under contrib/seccomp/airlock.json it runs CMD,
# its self-test passes (every enforcement check, from inside), and a
# connection the policy does not allow is refused.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
DEFAULT=/usr/share/containers/seccomp.json
PROFILE="$(dirname "$0")/../../contrib/seccomp/airlock.json"
[ -f "$DEFAULT" ] || skip "$DEFAULT not installed (golang-github-containers-common)"
/usr/bin/python3 -c 'import seccomp' 2>/dev/null || skip "python3-seccomp not installed"
sbx_setup
cp "$(dirname "$0")/container.py" "$DEFAULT" "$SCRATCH/"
cp "$PROFILE" "$SCRATCH/airlock.json"
chmod 644 "$SCRATCH/container.py" "$SCRATCH/seccomp.json" "$SCRATCH/airlock.json"

# in_container ROLE PROFILE CMD...: airlock run under PROFILE as ROLE.
in_container() {
	local role=$1 profile=$2 uid gid
	shift 2
	if [ "$role" = user ]; then
		uid=$(id -u "$AIRLOCK_TEST_USER") gid=$(id -g "$AIRLOCK_TEST_USER")
	else
		uid=$(id -u) gid=$(id -g)
	fi
	(cd "$(work "$role")" && HOME="$(work "$role")" /usr/bin/python3 "$SCRATCH/container.py" \
		"$profile" "$uid" "$gid" -- "$@")
}

for role in $ROLES; do
	rc=0
	out=$(in_container "$role" "$SCRATCH/seccomp.json" "$SCRATCH/airlock" run \
		-p "$SCRATCH/none.yaml" --log "$(logf "$role")" -- echo CMD-RAN 2>&1) || rc=$?
	expect_eq "$role: default profile: exit" 125 "$rc"
	case "$out" in *CMD-RAN*) fail "$role: default profile: CMD ran" ;; esac
	expect_match "$role: default profile: diagnosis" "^airlock: set-up: hostname: Operation not permitted; a seccomp filter refuses sethostname \(a container runtime's default profile\): give the container airlock's profile \(contrib/seccomp/airlock.json" "$out"

	rc=0
	out=$(in_container "$role" "$SCRATCH/airlock.json" "$SCRATCH/airlock" run \
		-p "$SCRATCH/none.yaml" --log "$(logf "$role")" -- \
		sh -c 'echo CMD-RAN; grep "^Seccomp:" /proc/self/status' 2>/dev/null) || rc=$?
	expect_eq "$role: airlock.json: exit" 0 "$rc"
	expect_match "$role: airlock.json: CMD ran" "^CMD-RAN$" "$out"
	expect_match "$role: airlock.json: CMD filtered" "^Seccomp:.2$" "$out"

	rc=0
	out=$(in_container "$role" "$SCRATCH/airlock.json" "$SCRATCH/airlock" selftest 2>&1) || rc=$?
	expect_eq "$role: airlock.json: selftest exit ($out)" 0 "$rc"
	expect_eq "$role: airlock.json: nine checks" 9 "$(grep -c '^ok   ' <<<"$out")"

	# Not allowed by the policy: refused and logged (TEST-NET-1, no route out).
	rm -f "$(logf "$role")"
	rc=0
	in_container "$role" "$SCRATCH/airlock.json" "$SCRATCH/airlock" run \
		-p "$SCRATCH/none.yaml" --log "$(logf "$role")" -- \
		bash -c 'exec 3<>/dev/tcp/192.0.2.1/80' 2>/dev/null || rc=$?
	[ "$rc" -ne 0 ] || fail "$role: airlock.json: a connection to 192.0.2.1:80 succeeded"
	expect_match "$role: airlock.json: refusal logged" '"192.0.2.1"' "$(cat "$(logf "$role")")"
done
echo "ok: container ($ROLES)"
