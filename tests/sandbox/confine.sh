#!/usr/bin/env bash
# The worker's confinement, proved from inside the worker (docs/run.md,
# "The worker"): airlock-confine-probe is airlock with a worker that, after
# each step of its confinement, tries what that step forbids and writes
# each errno to stderr (worker/probe.h). As root and rootless.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv
[ -n "${AIRLOCK_PROBE:-}" ] && [ -x "$AIRLOCK_PROBE" ] || skip "AIRLOCK_PROBE not built"
REAL_AIRLOCK=$AIRLOCK
AIRLOCK=$AIRLOCK_PROBE
sbx_setup
cp "$REAL_AIRLOCK" "$SCRATCH/airlock-real"
chmod 755 "$SCRATCH/airlock-real"

# The worker of the airlock process $1: its child in the same pid
# namespace (init, the other child, is pid 1 of the sandbox's).
worker_of() {
	local c
	# Its children: init (in the sandbox's pid namespace), the logger,
	# the broker and the worker, which names itself.
	for c in $(pgrep -P "$1"); do
		[ "$(cat /proc/"$c"/comm 2>/dev/null)" = airlock-worker ] && { echo "$c"; return; }
	done
}

probe() {
	local role=$1 rc
	rc=$(status_of al "$role" -- true 2>"$SCRATCH/err-$role")
	[ "$rc" = 0 ] || fail "$role: the probe run exited $rc: $(cat "$SCRATCH/err-$role")"
	sed -n 's/^airlock\[worker\]: confine-probe //p' "$SCRATCH/err-$role"
}

for r in $ROLES; do
	got=$(probe "$r")
	abi=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["kind"] == "task-start": print(o.get("landlock", "missing"))' "$(logf "$r")" | tail -1)
	uid=65534
	[ "$r" = user ] && uid=$(id -u "$AIRLOCK_TEST_USER")
	[ "$r" = self ] && [ "$(id -u)" -ne 0 ] && uid=$(id -u)
	# Without Landlock the empty root can be opened; nothing is in it.
	open_root=EACCES
	[ "$abi" = 0 ] && open_root=ok
	# The worker makes no socket and connects none: the broker dials the
	# proxy's upstreams and asks the DNS listener's questions.
	expected="mount open-etc-passwd=ENOENT
landlock open-root=$open_root
landlock fork=EAGAIN
landlock caps-effective=0 caps-permitted=0 bounding=0 no_new_privs=1 uid=$uid
seccomp openat=ENOSYS
seccomp socket-unix=ENOSYS
seccomp socket-inet=ENOSYS
seccomp connect=ENOSYS
seccomp bind=ENOSYS
seccomp listen=ENOSYS
seccomp ioctl-tiocgwinsz=ENOSYS
seccomp execve=ENOSYS
seccomp ptrace=ENOSYS
seccomp process_vm_readv=ENOSYS
seccomp prlimit-other=ENOSYS
seccomp fcntl-setown=ENOSYS
seccomp fcntl-async=ENOSYS
seccomp fork=ENOSYS"
	while IFS= read -r want; do
		grep -Eqx -- "$want" <<<"$got" || fail "$r: no line /$want/ in:
$got"
	done <<<"$expected"
	# ... and nothing else: a try the test does not know is a new one to judge.
	expect_eq "$r: probe lines" "$(wc -l <<<"$expected")" "$(wc -l <<<"$got")"
	# The confined worker still served and wrote the task's end.
	grep -q '"kind":"task-end"' "$(logf "$r")" || fail "$r: no task-end"
	echo "ok: $r: the worker is confined (Landlock ABI $abi)"
done

# A worker that dies while CMD runs ends the run, fail closed: the
# sandbox is killed, the run exits 125 and says why.
for r in $ROLES; do
	(cd "$(work "$r")" && exec setsid bash -c 'exec "$@"' _ bash -c '
		if [ "$1" = user ]; then shift; exec setpriv --reuid="$AIRLOCK_TEST_USER" \
			--regid="$AIRLOCK_TEST_USER" --init-groups "$@"; fi; shift; exec "$@"' _ "$r" \
		"$SCRATCH/airlock-real" run -p "$SCRATCH/none.yaml" --log "$(logf "$r")" -- sleep 30 \
		2>"$SCRATCH/die-$r") &
	shell=$!
	pid=
	for _ in $(seq 100); do
		pid=$(pgrep -f -o "^$SCRATCH/airlock-real run" || true)
		[ -n "$pid" ] && [ -n "$(worker_of "$pid")" ] && break
		sleep 0.05
	done
	w=$(worker_of "${pid:-0}")
	[ -n "$w" ] || { kill "$pid" 2>/dev/null; fail "$r: no worker process of airlock ${pid:-?}"; }
	start=$(date +%s%N)
	kill -KILL "$w"
	rc=0
	wait "$shell" || rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	expect_eq "$r: a dead worker fails the run" 125 "$rc"
	[ "$ms" -lt 5000 ] || fail "$r: the run took $ms ms to end after its worker died"
	expect_match "$r: says why" 'the worker serving the proxy, DNS and NFLOG ended: ending the sandbox' \
		"$(cat "$SCRATCH/die-$r")"
	echo "ok: $r: a dead worker ended the run in $ms ms (exit 125)"
done
