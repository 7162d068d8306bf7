#!/usr/bin/env bash
# Nothing survives a run: no process, mount, namespace or fd, after a
# normal exit, CMD killed, CMD leaving daemons behind, airlock itself
# getting SIGKILL, set-up failing halfway, and 200 sandboxes in a row.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv pgrep
sbx_setup
[ -n "${SUBREAPER:-}" ] && [ -x "$SUBREAPER" ] || fail "SUBREAPER not built"
cp "$SUBREAPER" "$SCRATCH/subreaper"
chmod 755 "$SCRATCH/subreaper"

# Processes of ours still alive: anything started from the scratch copy of
# airlock, or carrying the marker in its command line.
ours() { pgrep -f -- "$SCRATCH/airlock|sleep 42[0-9][0-9]" || true; }

# Any process on the host still in the namespaces whose links are $1 (net)
# and $2 (user)? A killed init may linger a moment as a zombie until the
# host's pid 1 reaps it (its credentials keep the user namespace): wait for
# that, up to 5 s.
ns_alive() {
	local i
	for i in $(seq 50); do
		ns_alive_now "$@" 2>/dev/null || return 1
		sleep 0.1
	done
	ns_alive_now "$@"
}

# The kernel reuses a freed namespace's inode number: a process of another
# test, started after the sandbox's namespaces were gone, can show the same
# "net:[N]". A process the sandbox left behind started before $3 (clock
# ticks since boot, see ticks_now); later ones are skipped.
ticks_now() {
	awk -v hz="$(getconf CLK_TCK)" '{ printf "%d\n", $1 * hz }' /proc/uptime
}

ns_alive_now() {
	local p st
	[ -n "$1" ] && [ -n "$2" ] && [ -n "$3" ] || fail "no namespace ids recorded"
	for p in /proc/[0-9]*; do
		st=$(sed 's/^.*) //' "$p/stat" 2>/dev/null | cut -d' ' -f20)
		[ -n "$st" ] && [ "$st" -lt "$3" ] || continue
		if [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$1" ] ||
			[ "$(readlink "$p/ns/user" 2>/dev/null)" = "$2" ]; then
			echo "still in the sandbox's namespaces: $p $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" >&2
			return 0
		fi
	done
	return 1
}

# airlock run as al runs it, but under a child subreaper (as a container's
# init or systemd --user would run it): whatever airlock left behind, dead
# or alive, would then be ours to reap, and tests/sandbox/subreaper.c fails
# (status 99) if anything is there the moment airlock returns.
al_reaped() {
	AL_WRAP="$SCRATCH/subreaper" al "$@"
}

wait_gone() {
	local i
	for i in $(seq 50); do
		[ -z "$(ours)" ] && return 0
		sleep 0.1
	done
	fail "$1: still running: $(ours | xargs -r ps -o pid,args -p)"
}

body() {
	local role=$1 w n u bg apid t
	w=$(work "$role")

	# Only stdio reaches CMD: no listener, log or socketpair fd.
	expect_eq "$role: CMD's fds" "0 1 2 3" "$(al "$role" -- sh -c 'ls /proc/self/fd | sort -n | tr "\n" " " | sed "s/ \$//"')"

	# CMD forking a daemon: the daemon dies with the sandbox, before
	# airlock returns (init kills and reaps it, the supervisor reaps init:
	# nothing is left to the caller, not even init's corpse).
	al_reaped "$role" -- sh -c 'readlink /proc/self/ns/net > ns.net; readlink /proc/self/ns/user > ns.user; sleep 4201 & exit 0' ||
		fail "$role: a process was left behind for airlock's caller"
	bg=$(ours)
	[ -z "$bg" ] || fail "$role: daemon still running after airlock returned: $(echo "$bg" | xargs -r ps -o pid,args -p)"
	n=$(cat "$w/ns.net") u=$(cat "$w/ns.user")
	ns_alive "$n" "$u" "$(ticks_now)" && fail "$role: sandbox namespaces outlived the run"

	# CMD killed.
	expect_eq "$role: CMD SIGKILL" 137 "$(status_of al_reaped "$role" -- sh -c 'sleep 4202 & kill -KILL $$')"
	wait_gone "$role: CMD killed"

	# airlock itself killed with SIGKILL: the sandbox follows.
	rm -f "$w/ns.net"
	(al "$role" -- sh -c 'readlink /proc/self/ns/net > ns.net; readlink /proc/self/ns/user > ns.user; sleep 4203 & exec sleep 4204') &
	bg=$!
	for _ in $(seq 50); do [ -s "$w/ns.net" ] && break; sleep 0.1; done
	[ -s "$w/ns.net" ] || fail "$role: sandbox did not start"
	n=$(cat "$w/ns.net") u=$(cat "$w/ns.user")
	apid=$(pgrep -o -f "$SCRATCH/airlock run .*sleep 4204")
	t=$(ticks_now)
	kill -KILL "$apid"
	wait "$bg" 2>/dev/null || true
	wait_gone "$role: airlock SIGKILL"
	ns_alive "$n" "$u" "$t" && fail "$role: namespaces outlived airlock's SIGKILL"

	# Set-up failing halfway (inside init, after the listeners were
	# handed over) and before the clone.
	expect_eq "$role: set-up failure" 125 "$(status_of al_reaped "$role" --tmpfs /proc/airlock-no -- sleep 4205 2>/dev/null)"
	wait_gone "$role: set-up failure"
	expect_eq "$role: bad workdir" 125 "$(status_of al "$role" --workdir /nonexistent -- true 2>/dev/null)"

	# --timeout: the supervisor kills init, and reaps it.
	expect_eq "$role: timeout" 124 "$(status_of al_reaped "$role" --timeout 1 -- sh -c 'sleep 4206 & exec sleep 4207' 2>/dev/null)"
	wait_gone "$role: timeout"
}

m0=$(wc -l </proc/self/mountinfo)
for role in $ROLES; do
	body "$role"
done

# Many sandboxes in a row: nothing accumulates. 200 runs, or as many as
# fit in 25 s on a slow (sanitizer) build, but never fewer than 50.
for role in $ROLES; do
	count=200
	[ "$role" = user ] && count=20
	t0=$(date +%s)
	for i in $(seq "$count"); do
		al_reaped "$role" -- true || fail "$role: run $i failed (99: left a process behind)"
		if [ $(($(date +%s) - t0)) -ge 25 ]; then
			[ "$i" -ge 50 ] || [ "$i" -ge "$count" ] || fail "$role: only $i runs in 25 s"
			break
		fi
	done
	echo "$role: $i sandboxes in $(($(date +%s) - t0)) s"
	wait_gone "$role: $count runs"
done
m1=$(wc -l </proc/self/mountinfo)
expect_eq "host mount table unchanged" "$m0" "$m1"
echo "ok: leaks ($ROLES)"
