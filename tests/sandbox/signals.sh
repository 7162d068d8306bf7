#!/usr/bin/env bash
# CMD runs in a session of its own: what it does to its process group
# reaches neither the supervisor nor init. kill(0, SIGSTOP) cannot freeze
# --timeout, kill(0, SIGKILL) ends CMD only (airlock still writes the
# connections still open and task-end, and exits 137), and a signal sent to
# airlock's whole process group (as `timeout` and shells send them) reaches
# CMD once.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv setsid bash
sbx_setup

# spawn ROLE ARGS...: `airlock run ARGS` in the background, in a session
# of its own, so that a build whose CMD shares airlock's process group
# cannot stop or kill this script. Sets SPID (airlock's pid).
spawn() {
	local role=$1 pre=() home
	shift
	if [ "$role" = user ]; then
		home=$(getent passwd "$AIRLOCK_TEST_USER" | cut -d: -f6)
		pre=(setpriv --reuid="$AIRLOCK_TEST_USER" --regid="$AIRLOCK_TEST_USER" --init-groups
			env HOME="$home" USER="$AIRLOCK_TEST_USER")
	fi
	# Not a process group leader here, so setsid(1) execs in place: $! is
	# airlock itself.
	(cd "$(work "$role")" && exec setsid "${pre[@]}" "$SCRATCH/airlock" run \
		-p "$SCRATCH/none.yaml" --log "$(logf "$role")" "$@") </dev/null 2>"$SCRATCH/stderr" &
	SPID=$!
}

# alive PID: running or stopped, not a zombie.
alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "${st%% *}" != Z ]
}

# finish SECONDS: wait that long at most for the spawned airlock; sets RC
# to its exit status and MS to how long it took. One still there is killed
# (the sandbox follows it: init's parent-death signal), RC "alive".
finish() {
	local i t0=$(date +%s%N)
	for i in $(seq $(($1 * 20))); do
		alive "$SPID" || break
		sleep 0.05
	done
	RC=0
	if alive "$SPID"; then
		kill -KILL "$SPID"
		wait "$SPID" 2>/dev/null || true
		RC=alive
	else
		wait "$SPID" || RC=$?
	fi
	MS=$((($(date +%s%N) - t0) / 1000000))
}

for role in $ROLES; do
	log=$(logf "$role")

	# SIGSTOP to CMD's own process group: --timeout still fires.
	spawn "$role" --timeout 2 -- sh -c 'kill -STOP 0; echo not stopped'
	finish 10
	expect_eq "$role: kill -STOP 0 under --timeout 2 (after $MS ms)" 124 "$RC"
	[ "$MS" -lt 6000 ] || fail "$role: kill -STOP 0 under --timeout 2 took $MS ms"
	spawn "$role" --timeout 2 -- python3 -c 'import os, signal; os.kill(0, signal.SIGSTOP)'
	finish 10
	expect_eq "$role: os.kill(0, SIGSTOP) under --timeout 2 (after $MS ms)" 124 "$RC"

	# SIGKILL to CMD's process group: CMD's status, and the log is
	# complete: the connection CMD held open is logged, then task-end.
	: >"$log"
	spawn "$role" -- bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128
		printf "CONNECT evil.test:443 HTTP/1.1\r\n" >&3; sleep 0.3; kill -KILL 0'
	finish 10
	expect_eq "$role: kill -KILL 0 (after $MS ms)" 137 "$RC"
	expect_match "$role: kill -KILL 0: task-end" '"kind":"task-end".*"exit_status":137' \
		"$(tail -1 "$log")"
	expect_eq "$role: kill -KILL 0: the open connection logged" 1 \
		"$(grep -cE '"kind":"(http|connect|tcp|tls)"' "$log" || true)"

	# A SIGTERM to airlock's process group (the supervisor, and whatever
	# shares its group) is CMD's once: CMD counts what it gets over a
	# second, in steps short enough to tell deliveries apart.
	spawn "$role" -- sh -c 'n=0; trap "n=\$((n+1))" TERM; echo ready >ready
		i=0; while [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done; echo $n >count'
	rm -f "$(work "$role")/ready" "$(work "$role")/count"
	for i in $(seq 100); do
		[ -e "$(work "$role")/ready" ] && break
		sleep 0.05
	done
	kill -TERM -- "-$SPID"
	finish 10
	expect_eq "$role: SIGTERM to airlock's group: status" 0 "$RC"
	expect_eq "$role: SIGTERM to airlock's group: deliveries to CMD" 1 \
		"$(cat "$(work "$role")/count" 2>/dev/null || echo none)"
done
echo "ok: signals ($ROLES)"
