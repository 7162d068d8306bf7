#!/usr/bin/env bash
# CMD's terminal. With stdin and stdout a terminal, CMD gets a terminal of
# its own that airlock relays: isatty() and ttyname() work inside, the window size
# follows the caller's, Ctrl-C reaches CMD exactly once, and nothing CMD
# does to its terminal (tcsetpgrp, TIOCSTI) reaches the caller's.
# Otherwise CMD runs in a session of its own, without a controlling
# terminal, and the terminal's Ctrl-C still reaches it once.
# Each run is a job of a shell on a new pseudo-terminal (ptyshell.py),
# which then reports what the caller's terminal looks like.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv python3
sbx_setup
PTYSHELL=$TESTS_DIR/sandbox/ptyshell.py

# ptyal ROLE [HARNESS ARGS...] -- [AIRLOCK RUN ARGS...]: airlock run as a
# job on a new terminal; prints ptyshell.py's report.
ptyal() {
	local role=$1 h=() pre=() home
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		h+=("$1")
		shift
	done
	shift
	if [ "$role" = user ]; then
		home=$(getent passwd "$AIRLOCK_TEST_USER" | cut -d: -f6)
		pre=(setpriv --reuid="$AIRLOCK_TEST_USER" --regid="$AIRLOCK_TEST_USER" --init-groups
			env HOME="$home" USER="$AIRLOCK_TEST_USER")
	fi
	(cd "$(work "$role")" && python3 "$PTYSHELL" "${h[@]}" -- "${pre[@]}" "$SCRATCH/airlock" run \
		-p "$SCRATCH/none.yaml" --log "$(logf "$role")" "$@")
}

# report KEY TEXT: the value of @KEY in a report.
report() { sed -n "s/^@$1 //p" <<<"$2"; }
# lines PREFIX TEXT: the output lines starting with PREFIX, joined (a
# terminal's echo of Ctrl-C, Ctrl-Z and Ctrl-\ removed first).
lines() { sed 's/\^[CZ\\]//g' <<<"$2" | grep "^$1" | tr '\n' ' ' | sed 's/ $//'; }

# expect_clean ROLE WHAT REPORT: the caller's terminal as it was.
expect_clean() {
	expect_eq "$1: $2: no step timed out" "" "$(grep '^@timeout\|^@deadline\|^@nocmd' <<<"$3" || true)"
	expect_eq "$1: $2: foreground group" same "$(report fg "$3")"
	expect_eq "$1: $2: termios" same "$(report termios "$3")"
	expect_eq "$1: $2: file status flags" same "$(report flags "$3")"
	expect_eq "$1: $2: input queue" 0 "$(report pending "$3")"
}

STI='import fcntl, os, termios
def sti(fd):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        return "ok"
    except OSError as e:
        return str(e.errno)
try:
    tty = os.open("/dev/tty", os.O_RDWR)
    t = sti(tty)
except OSError as e:
    t = "open-" + str(e.errno)
print("STI", sti(0), sti(1), sti(2), t)'

PGRP='import os, signal, termios
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
os.setpgid(0, 0)
for fd in (0, 1, 2):
    try:
        os.tcsetpgrp(fd, os.getpgrp())
        print("PGRP", fd, "ok", os.tcgetpgrp(fd) == os.getpgrp())
    except OSError as e:
        print("PGRP", fd, e.errno)'

TTYNAME='import os, sys
out = sys.stdout if os.isatty(1) else sys.stderr
for fd in (0, 1, 2):
    try:
        print("TTY", fd, os.isatty(fd), os.ttyname(fd), file=out)
    except OSError as e:
        print("TTY", fd, os.isatty(fd), e.errno, file=out)'

WINCH='import os, signal, sys, time
def size():
    s = os.get_terminal_size(0)
    print("SIZE", s.lines, s.columns, flush=True)
signal.signal(signal.SIGWINCH, lambda *a: (size(), sys.exit(0)))
size()
time.sleep(10)'

for role in $ROLES; do
	for mode in pty stdin-null; do
		m=()
		[ "$mode" = stdin-null ] && m=(--stdin-null)

		# Ctrl-C once: a CMD that handles it counts one.
		out=$(ptyal "$role" "${m[@]}" expect:READY send:'\x03' -- -- \
			sh -c 'n=0; trap "n=\$((n+1))" INT; echo READY; sleep 1; echo INT $n; exit 7')
		expect_eq "$role $mode: Ctrl-C once, handled" "INT 1" "$(lines INT "$out")"
		expect_eq "$role $mode: Ctrl-C once, status" 7 "$(report status "$out")"
		expect_clean "$role $mode" "Ctrl-C once" "$out"

		# Ctrl-C kills a CMD that does not handle it.
		out=$(ptyal "$role" "${m[@]}" expect:READY send:'\x03' -- -- \
			sh -c 'echo READY; exec sleep 10')
		expect_eq "$role $mode: Ctrl-C kills CMD" 130 "$(report status "$out")"
		expect_clean "$role $mode" "Ctrl-C kills CMD" "$out"

		# TIOCSTI is refused on every terminal CMD holds, and nothing
		# reaches the caller's input queue.
		out=$(ptyal "$role" "${m[@]}" -- -- python3 -c "$STI")
		if [ "$mode" = pty ]; then
			expect_eq "$role $mode: TIOCSTI refused" "STI 1 1 1 1" "$(lines STI "$out")"
		else
			# No controlling terminal: /dev/tty is ENXIO.
			expect_eq "$role $mode: TIOCSTI refused" "STI 1 1 1 open-6" "$(lines STI "$out")"
		fi
		expect_clean "$role $mode" "TIOCSTI" "$out"

		# tcsetpgrp moves the foreground of CMD's own terminal only; the
		# caller's terminal's foreground group stays the job's.
		out=$(ptyal "$role" "${m[@]}" -- -- sh -c "python3 -c '$PGRP'; echo DONE")
		if [ "$mode" = pty ]; then
			expect_eq "$role $mode: tcsetpgrp on CMD's terminal" \
				"PGRP 0 ok True PGRP 1 ok True PGRP 2 ok True" "$(lines PGRP "$out")"
		else
			expect_eq "$role $mode: tcsetpgrp without a controlling terminal" \
				"PGRP 0 25 PGRP 1 25 PGRP 2 25" "$(lines PGRP "$out")"
		fi
		expect_clean "$role $mode" "tcsetpgrp" "$out"
	done

	# isatty and ttyname inside: the sandbox's own /dev/pts/0.
	out=$(ptyal "$role" -- -- python3 -c "$TTYNAME")
	expect_eq "$role: isatty, ttyname" \
		"TTY 0 True /dev/pts/0 TTY 1 True /dev/pts/0 TTY 2 True /dev/pts/0" "$(lines TTY "$out")"
	expect_clean "$role" "ttyname" "$out"
	# stderr not the terminal: CMD's as it was, CMD's terminal on the
	# other two.
	out=$(ptyal "$role" --stderr "$SCRATCH/stderr-$role" -- -- \
		sh -c "python3 -c '$TTYNAME'; echo to-stderr >&2")
	expect_eq "$role: stderr redirected: CMD's fds" \
		"TTY 0 True /dev/pts/0 TTY 1 True /dev/pts/0 TTY 2 False 25" "$(lines TTY "$out")"
	expect_eq "$role: stderr redirected: the file" to-stderr "$(cat "$SCRATCH/stderr-$role")"
	expect_clean "$role" "stderr redirected" "$out"
	# stdout not the terminal (a file here; a pipe to a pager, which may
	# use the terminal itself): no terminal of CMD's own, the caller's
	# fds as they are, and none of them CMD's controlling terminal
	# (ttyname finds no name for the caller's terminal inside, ENODEV).
	out=$(ptyal "$role" --stdout "$SCRATCH/stdout-$role" -- -- \
		sh -c "python3 -c '$TTYNAME'; python3 -c '$PGRP' >&2; echo to-stdout")
	expect_eq "$role: stdout redirected: CMD's fds" \
		"TTY 0 True 19 TTY 1 False 25 TTY 2 True 19" "$(lines TTY "$out")"
	expect_eq "$role: stdout redirected: no controlling terminal" \
		"PGRP 0 25 PGRP 1 25 PGRP 2 25" "$(lines PGRP "$out")"
	expect_eq "$role: stdout redirected: the file" to-stdout "$(cat "$SCRATCH/stdout-$role")"
	expect_clean "$role" "stdout redirected" "$out"

	# The window size inside is the caller's, and follows a resize.
	out=$(ptyal "$role" --size 33x111 expect:'SIZE 33 111\n' resize:40x120 expect:'SIZE 40 120\n' -- -- \
		python3 -c "$WINCH")
	expect_eq "$role: window size, resized" "SIZE 33 111 SIZE 40 120" "$(lines SIZE "$out")"
	expect_eq "$role: window size: status" 0 "$(report status "$out")"
	expect_clean "$role" "window size" "$out"

	# stdin a terminal that is not airlock's controlling terminal: the
	# relay then shares the caller's open file description, and gives
	# its flags back.
	out=$(ptyal "$role" --no-ctty expect:READY send:'\x03' -- -- \
		sh -c 'n=0; trap "n=\$((n+1))" INT; echo READY; sleep 1; echo INT $n; exit 7')
	expect_eq "$role no-ctty: Ctrl-C once, handled" "INT 1" "$(lines INT "$out")"
	expect_clean "$role no-ctty" "Ctrl-C once" "$out"
done
echo "ok: tty ($ROLES)"
