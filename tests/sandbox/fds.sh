#!/usr/bin/env bash
# What each process of a run holds (docs/run.md, "The processes"): a run
# given extra descriptors by its caller (9<file, 7>>file, 6<dir) passes
# none of them to the worker, the broker, the logger, init or CMD, and the
# supervisor gives them up once set-up has read what it names; the
# worker, broker and logger hold /dev/null as stdin and stdout (not the
# caller's). Inspected from outside, in /proc/PID/fd, while CMD runs.
# As root and rootless.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
sbx_setup
echo "not the sandbox's" >"$SCRATCH/given-read"
: >"$SCRATCH/given-append"
mkdir "$SCRATCH/given-dir"
chmod 644 "$SCRATCH/given-read" "$SCRATCH/given-append"
chmod 755 "$SCRATCH/given-dir"

# The fds of process $1, one "N -> TARGET" a line.
fds_of() {
	local f
	for f in /proc/"$1"/fd/*; do
		echo "${f##*/} -> $(readlink "$f" 2>/dev/null || echo '?')"
	done
}

# child_named PARENT COMM: its child that names itself COMM.
child_named() {
	local c
	for c in $(pgrep -P "$1"); do
		[ "$(cat /proc/"$c"/comm 2>/dev/null)" = "$2" ] && { echo "$c"; return; }
	done
	return 0 # none yet: an empty answer, not a failure (set -e)
}

# check WHO LISTING PATTERN: every line of LISTING matches PATTERN (an ERE
# of what WHO may hold), and none names a descriptor the caller gave.
check() {
	local who=$1 listing=$2 allowed=$3 line
	while IFS= read -r line; do
		case "$line" in
		*given-*) fail "$who holds the caller's descriptor: $line
$listing" ;;
		esac
		grep -Eqx -- "$allowed" <<<"$line" || fail "$who holds an unexpected descriptor: $line
$listing"
	done <<<"$listing"
}

for r in $ROLES; do
	w=$(work "$r")
	rm -f "$w/release" "$SCRATCH/cmd-$r"
	# CMD lists its own descriptors, then waits (bounded) for the test.
	(al "$r" -- sh -c 'ls /proc/$$/fd; i=0
		while [ ! -e release ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done' \
		>"$SCRATCH/cmd-$r" 2>"$SCRATCH/err-$r" \
		9<"$SCRATCH/given-read" 7>>"$SCRATCH/given-append" 6<"$SCRATCH/given-dir") &
	shell=$!
	sup= worker= broker= logger=
	for _ in $(seq 200); do
		sup=$(pgrep -f -o "^$SCRATCH/airlock run -p $SCRATCH/none.yaml --log $(logf "$r")" || true)
		if [ -n "$sup" ]; then
			worker=$(child_named "$sup" airlock-worker)
			broker=$(child_named "$sup" airlock-broker)
			logger=$(child_named "$sup" airlock-logger)
			[ -n "$worker" ] && [ -n "$broker" ] && [ -n "$logger" ] &&
				[ -s "$SCRATCH/cmd-$r" ] && break
		fi
		sleep 0.05
	done
	[ -n "$worker" ] && [ -n "$broker" ] && [ -n "$logger" ] || {
		touch "$w/release"
		wait "$shell" || true
		fail "$r: not every process was found (supervisor '$sup', worker '$worker'," \
			"broker '$broker', logger '$logger'): $(cat "$SCRATCH/err-$r")"
	}
	sup_fds=$(fds_of "$sup")
	# init: the sandbox's pid 1, the supervisor's child that keeps its name.
	init=$(child_named "$sup" airlock)
	init_fds=$(fds_of "${init:-0}")
	worker_fds=$(fds_of "$worker")
	broker_fds=$(fds_of "$broker")
	logger_fds=$(fds_of "$logger")
	touch "$w/release"
	rc=0
	wait "$shell" || rc=$?
	expect_eq "$r: the run's status" 0 "$rc"

	stderr_file="$SCRATCH/err-$r"
	# The worker: stdin and stdout /dev/null, stderr the supervisor's
	# pipe; then its sockets, epoll set, eventfds, reserve and pipes.
	expect_match "$r: worker stdin" '^0 -> /dev/null$' "$(sed -n '/^0 /p' <<<"$worker_fds")"
	expect_match "$r: worker stdout" '^1 -> /dev/null$' "$(sed -n '/^1 /p' <<<"$worker_fds")"
	expect_match "$r: worker stderr" '^2 -> pipe:' "$(sed -n '/^2 /p' <<<"$worker_fds")"
	check "$r: the worker" "$worker_fds" \
		'[0-9]+ -> (/dev/null|socket:\[[0-9]+\]|pipe:\[[0-9]+\]|anon_inode:\[(eventpoll|eventfd)\])'
	# The broker: /dev/null, stderr, its sockets, epoll set and pipes.
	expect_match "$r: broker stdin" '^0 -> /dev/null$' "$(sed -n '/^0 /p' <<<"$broker_fds")"
	expect_match "$r: broker stdout" '^1 -> /dev/null$' "$(sed -n '/^1 /p' <<<"$broker_fds")"
	check "$r: the broker" "$broker_fds" \
		"([01] -> /dev/null|2 -> $stderr_file|[0-9]+ -> (socket:\[[0-9]+\]|pipe:\[[0-9]+\]|anon_inode:\[eventpoll\]))"
	# The logger: exactly /dev/null twice, stderr, the log, its socket.
	check "$r: the logger" "$logger_fds" \
		"([01] -> /dev/null|2 -> $stderr_file|[0-9]+ -> ($(logf "$r")|socket:\[[0-9]+\]))"
	expect_eq "$r: the logger's descriptors" 5 "$(wc -l <<<"$logger_fds")"
	# init: stdio and its socket to the supervisor.
	[ -n "$init" ] || fail "$r: no init process of airlock $sup"
	check "$r: init" "$init_fds" '([0-2] -> .*|[0-9]+ -> socket:\[[0-9]+\])'
	# The supervisor: none of the caller's once set-up is done.
	check "$r: the supervisor" "$sup_fds" '.*'
	# CMD: the caller's stdin, stdout and stderr, nothing else.
	expect_eq "$r: CMD's descriptors" "0 1 2" "$(tr '\n' ' ' <"$SCRATCH/cmd-$r" | sed 's/ $//')"
	echo "ok: $r: worker, broker, logger and CMD hold only their own descriptors"
done

# What the command line names through a descriptor is read before the
# caller's descriptors are closed: a policy and a log given as /dev/fd/N.
for r in $ROLES; do
	# The pipe made as the role: a pipe of root's cannot be opened anew
	# through /dev/fd by another user.
	out=$(cd "$(work "$r")" && as "$r" bash -c \
		'"$1" run -p /dev/fd/8 --log /dev/fd/5 -- echo cmd-out 8<"$2" 5>&1 >/dev/null | cat' \
		_ "$SCRATCH/airlock" "$SCRATCH/none.yaml") || fail "$r: -p /dev/fd/8 --log /dev/fd/5 failed"
	expect_match "$r: the log through fd 5" '"kind":"task-end"' "$out"
	echo "ok: $r: a policy and a log through the caller's descriptors"
done
