#!/usr/bin/env bash
# What each process of a run holds (docs/run.md, "The processes and their
# descriptors"): the caller's extra descriptors reach none of them, and the
# caller's stdin and stdout reach only the supervisor and CMD. Run with
# fds 7 (a file), 9 (a file) and 11 (a pipe) open, and stdin and stdout on
# files of their own; /proc/PID/fd of the worker, the broker and the
# logger is read while CMD runs, and CMD lists its own.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv
sbx_setup

# The descriptors of $1, one "N TARGET" a line.
fds_of() {
	local f
	for f in /proc/"$1"/fd/*; do
		echo "${f##*/} $(readlink "$f" 2>/dev/null || echo gone)"
	done | sort -n
}

# The child of $1 that names itself $2.
child_named() {
	local c
	for c in $(pgrep -P "$1"); do
		[ "$(cat /proc/"$c"/comm 2>/dev/null)" = "$2" ] && { echo "$c"; return; }
	done
}

for r in $ROLES; do
	w=$(work "$r")
	echo secret-7 >"$w/seven"
	echo secret-9 >"$w/nine"
	echo input >"$w/stdin"
	: >"$w/stdout"
	chmod 644 "$w/seven" "$w/nine" "$w/stdin"
	chmod 666 "$w/stdout"
	# CMD lists its descriptors, then waits for the test to look.
	(al "$r" -- sh -c 'for f in /proc/self/fd/*; do echo "cmd-fd ${f##*/}"; done; sleep 3' \
		7<"$w/seven" 9<"$w/nine" 11< <(sleep 6) <"$w/stdin" >"$w/stdout" \
		2>"$SCRATCH/err-$r") &
	# The airlock process: the one running with this role's log.
	al_pid=
	for _ in $(seq 50); do
		al_pid=$(pgrep -f -- "--log $(logf "$r") -- sh -c" | head -1) || true
		[ -n "$al_pid" ] && [ -n "$(child_named "$al_pid" airlock-broker)" ] && break
		sleep 0.1
	done
	[ -n "$al_pid" ] || fail "$r: the airlock process not found"
	worker=$(child_named "$al_pid" airlock-worker)
	broker=$(child_named "$al_pid" airlock-broker)
	logger=$(child_named "$al_pid" airlock-logger)
	[ -n "$worker" ] && [ -n "$broker" ] && [ -n "$logger" ] ||
		fail "$r: worker '$worker' broker '$broker' logger '$logger'"
	for p in worker broker logger; do
		fds_of "${!p}" >"$SCRATCH/fds-$r-$p"
	done
	# The caller's pipe, as the supervisor (which keeps it) sees it.
	pipe11=$(readlink /proc/"$al_pid"/fd/11)
	expect_match "$r: the supervisor's fd 11" '^pipe:' "$pipe11"
	wait

	for p in worker broker logger; do
		got=$(cat "$SCRATCH/fds-$r-$p")
		# None of the caller's: its files, its pipe, its stdin and stdout.
		if grep -E "$w/(seven|nine|stdin|stdout)\$| ${pipe11//[/\\[}\$" <<<"$got"; then
			fail "$r: the $p holds a descriptor of the caller's:
$got"
		fi
		# stdin and stdout on /dev/null, stderr a pipe to the supervisor
		# (the worker's) or the supervisor's own (broker and logger).
		grep -qx '0 /dev/null' <<<"$got" || fail "$r: $p: stdin is not /dev/null:
$got"
		grep -qx '1 /dev/null' <<<"$got" || fail "$r: $p: stdout is not /dev/null:
$got"
	done
	# Beyond stdio, the broker holds its socket to the worker and what it
	# made itself (its event loop and libevent's signal pipe, its DNS
	# sockets): no file.
	extra=$(awk '$1 > 2' "$SCRATCH/fds-$r-broker")
	grep -Eqx '[0-9]+ socket:\[[0-9]+\]' <<<"$extra" ||
		fail "$r: the broker holds no socket: $(cat "$SCRATCH/fds-$r-broker")"
	if grep -Evx '[0-9]+ (socket|pipe):\[[0-9]+\]|[0-9]+ anon_inode:.*' <<<"$extra"; then
		fail "$r: the broker holds a file: $(cat "$SCRATCH/fds-$r-broker")"
	fi
	# The logger: stdio, its socket and the log; nothing else.
	extra=$(awk '$1 > 2' "$SCRATCH/fds-$r-logger")
	grep -Eq "^[0-9]+ $(logf "$r")\$" <<<"$extra" ||
		fail "$r: the logger does not hold the log: $(cat "$SCRATCH/fds-$r-logger")"
	if grep -Evx "[0-9]+ (socket:\[[0-9]+\]|anon_inode:.*|$(logf "$r"))" <<<"$extra"; then
		fail "$r: the logger holds more than its socket and the log: $(cat "$SCRATCH/fds-$r-logger")"
	fi
	# CMD: the caller's 0, 1 and 2 only (the shell's glob adds its own
	# /proc/self/fd directory, fd 3, while it lists).
	got=$(grep '^cmd-fd ' "$w/stdout" | cut -d' ' -f2 | sort -n | tr '\n' ' ')
	expect_eq "$r: CMD's descriptors" "0 1 2 3 " "$got"
	grep -q '"kind":"task-end"' "$(logf "$r")" || fail "$r: no task-end"
	echo "ok: $r: worker, broker, logger and CMD hold none of the caller's descriptors"
done

# What the command line names through one of the caller's descriptors is
# read by the supervisor all the same: a policy and a log as /dev/fd/N.
for r in $ROLES; do
	# The pipe made as the role: a pipe of root's cannot be opened anew
	# through /dev/fd by another user.
	out=$(cd "$(work "$r")" && as "$r" bash -c \
		'"$1" run -p /dev/fd/8 --log /dev/fd/5 -- echo cmd-out 8<"$2" 5>&1 >/dev/null | cat' \
		_ "$SCRATCH/airlock" "$SCRATCH/none.yaml") || fail "$r: -p /dev/fd/8 --log /dev/fd/5 failed"
	expect_match "$r: the log through fd 5" '"kind":"task-end"' "$out"
	echo "ok: $r: a policy and a log through the caller's descriptors"
done
