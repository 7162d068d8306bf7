#!/usr/bin/env bash
# airlock in a container as Docker makes one (tests/sandbox/container.py:
# masked /proc, Docker's default seccomp rules, no capabilities, an
# unprivileged user). Without airlock's profile and flags it says why in
# one line and exits 125; with contrib/seccomp/airlock.json and
# systempaths=unconfined (--unmasked) it runs, passes its self-test and
# enforces the policy (a refused connection, logged).
. "$(dirname "$0")/../lib.sh"
need_root
need_prog curl
PY=/usr/bin/python3
"$PY" -c 'import seccomp' 2>/dev/null || skip "python3-seccomp is not installed (scripts/setup.sh)"
user=${AIRLOCK_TEST_USER:-airlock-test}
id "$user" >/dev/null 2>&1 || skip "no user $user (AIRLOCK_TEST_USER)"
scratch_dir
cp "$AIRLOCK" "$SCRATCH/airlock"
chmod 755 "$SCRATCH/airlock"
printf 'version: 1\nname: none\ndescription: allows nothing\n' >"$SCRATCH/none.yaml"
mkdir "$SCRATCH/work"
chown "$user:" "$SCRATCH/work"
chmod 644 "$SCRATCH/none.yaml"
PROFILE=$SOURCE_ROOT/contrib/seccomp/airlock.json
BASE=/usr/share/containers/seccomp.json

ctr() { (cd "$SCRATCH/work" && "$PY" "$TESTS_DIR/sandbox/container.py" --user "$user" "$@"); }
run_in() {
	ctr "$@" -- "$SCRATCH/airlock" run -p "$SCRATCH/none.yaml" --log "$SCRATCH/work/egress.jsonl" \
		-- echo CMD-RAN
}

# expect_refused WHAT REGEX CONTAINER-ARGS...: one line on stderr matching
# REGEX, exit 125, CMD not run; selftest says the same.
expect_refused() {
	local what=$1 re=$2 rc=0 out err
	shift 2
	out=$(run_in "$@" 2>"$SCRATCH/err") || rc=$?
	err=$(cat "$SCRATCH/err")
	expect_eq "$what: exit" 125 "$rc"
	case "$out" in *CMD-RAN*) fail "$what: CMD ran" ;; esac
	expect_eq "$what: one line" 1 "$(wc -l <"$SCRATCH/err")"
	expect_match "$what: diagnosis" "^airlock: $re" "$err"
	rc=0
	out=$(ctr "$@" -- "$SCRATCH/airlock" selftest 2>&1) || rc=$?
	[ "$rc" -ne 0 ] || fail "$what: selftest passed"
	expect_match "$what: selftest diagnosis" "^(airlock|FAIL user namespace): $re" "$out"
	expect_eq "$what: selftest one line" 1 "$(wc -l <<<"$out")"
}

# Docker's defaults: the seccomp filter is named, not the sysctls.
expect_refused "docker default" \
	"cannot create the sandbox's namespaces: clone: Operation not permitted; a seccomp filter refuses it \(Seccomp: 2 in /proc/self/status\): airlock is already sandboxed, or a container runtime's seccomp profile applies: run the container with airlock's profile \(docker/podman run --security-opt seccomp=airlock.json from contrib/seccomp; Kubernetes seccompProfile type: Localhost" \
	--seccomp docker
# selftest puts it on its FAIL line.
out=$(ctr --seccomp docker -- "$SCRATCH/airlock" selftest 2>&1) || true
expect_match "selftest FAIL line" "^FAIL user namespace: cannot create the sandbox's namespaces: clone: Operation not permitted; a seccomp filter refuses it" "$out"
grep -q sysctl <<<"$out" && fail "docker default: the sysctls blamed: $out"

# Namespaces allowed, /proc still masked: the fresh /proc is refused.
for sc in unconfined "$PROFILE"; do
	expect_refused "masked /proc ($sc)" \
		"filesystem: mount proc: Operation not permitted; /proc is masked here \(/proc/[a-z_]+ is covered, as container runtimes do\), so the kernel refuses a fresh /proc: run the container with --security-opt systempaths=unconfined \(Docker, Podman\) or securityContext procMount: Unmasked" \
		--seccomp "$sc"
done

# The runtime's default profile without airlock's addition.
if [ -f "$BASE" ]; then
	expect_refused "runtime default profile" \
		"set-up: hostname: Operation not permitted; a seccomp filter refuses sethostname" \
		--seccomp "$BASE" --unmasked
fi

# With the profile and the flag: the self-test passes...
rc=0
out=$(ctr --seccomp "$PROFILE" --unmasked -- "$SCRATCH/airlock" selftest 2>&1) || rc=$?
expect_eq "profile: selftest exit ($out)" 0 "$rc"
expect_eq "profile: nine checks" 9 "$(grep -c '^ok   ' <<<"$out")"
# ... and the policy is enforced: the connection is refused and logged.
rc=0
ctr --seccomp "$PROFILE" --unmasked -- "$SCRATCH/airlock" run -p "$SCRATCH/none.yaml" \
	--log "$SCRATCH/work/egress.jsonl" -- curl -fsS -m 5 http://203.0.113.7/ \
	>"$SCRATCH/out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "profile: curl to 203.0.113.7 succeeded: $(cat "$SCRATCH/out")"
expect_match "profile: refusal on stderr" "refused 203.0.113.7:80: no rule allows address 203.0.113.7 port 80" "$(cat "$SCRATCH/out")"
log=$(cat "$SCRATCH/work/egress.jsonl")
expect_match "profile: deny logged" '"kind":"http","host":"203.0.113.7","port":80,"verdict":"deny"' "$log"
expect_match "profile: self-test in task-start" '"kind":"task-start".*"selftest":"pass"' "$log"
expect_match "profile: task-end" '"kind":"task-end"' "$log"
echo "ok: container"
