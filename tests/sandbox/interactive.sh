#!/usr/bin/env bash
# Interactive use on a terminal: a shell under airlock runs commands,
# Ctrl-C stops its foreground job, Ctrl-Z and Ctrl-\ reach CMD, and the
# caller's terminal is as it was afterwards (tcgetattr, file status flags,
# foreground group), also when CMD is killed from outside mid-line-edit
# and when --timeout fires.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv python3 bash
sbx_setup
PTYSHELL=$TESTS_DIR/sandbox/ptyshell.py

# ptyal ROLE [HARNESS ARGS...] -- [AIRLOCK RUN ARGS...] (as in tty.sh).
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
report() { sed -n "s/^@$1 //p" <<<"$2"; }
lines() { sed 's/\^[CZ\\]//g' <<<"$2" | grep "^$1" | tr '\n' ' ' | sed 's/ $//'; }
expect_clean() {
	expect_eq "$1: $2: no step timed out" "" "$(grep '^@timeout\|^@deadline\|^@nocmd' <<<"$3" || true)"
	expect_eq "$1: $2: foreground group" same "$(report fg "$3")"
	expect_eq "$1: $2: termios" same "$(report termios "$3")"
	expect_eq "$1: $2: file status flags" same "$(report flags "$3")"
	expect_eq "$1: $2: input queue" 0 "$(report pending "$3")"
}

P='airlock-test$ '
for role in $ROLES; do
	for sh in "sh -i" "bash --norc --noprofile -i"; do
		# A command, then Ctrl-C on a foreground sleep: the prompt is
		# back at once, and the shell exits normally.
		t0=$(date +%s)
		out=$(ptyal "$role" expect:"$P" send:'echo hi-$((6*7))\r' expect:'hi-42' expect:"$P" \
			send:'sleep 30\r' sleep:0.5 send:'\x03' expect:"$P" send:'exit 3\r' -- \
			--env PS1="$P" -- $sh)
		t1=$(date +%s)
		expect_eq "$role $sh: status" 3 "$(report status "$out")"
		[ $((t1 - t0)) -lt 20 ] || fail "$role $sh: Ctrl-C did not stop sleep 30 ($((t1 - t0)) s)"
		expect_clean "$role $sh" "session" "$out"

		# CMD killed from outside while the shell edits a line (bash's
		# readline has the terminal in its own modes then).
		out=$(ptyal "$role" expect:"$P" send:'echo half a li' sleep:0.3 killcmd:KILL -- \
			--env PS1="$P" -- $sh)
		expect_eq "$role $sh: killed: status" 137 "$(report status "$out")"
		expect_clean "$role $sh" "killed by SIGKILL" "$out"

		# --timeout fires at the prompt.
		out=$(ptyal "$role" expect:"$P" send:'echo half a li' -- --timeout 2 --env PS1="$P" -- $sh)
		expect_eq "$role $sh: timeout: status" 124 "$(report status "$out")"
		expect_clean "$role $sh" "timeout" "$out"
	done

	# Ctrl-Z and Ctrl-\ are CMD's, as Ctrl-C is: the terminal's line
	# discipline signals CMD's foreground group, never airlock.
	out=$(ptyal "$role" expect:READY send:'\x1a' expect:got-TSTP send:'\x1c' expect:got-QUIT -- -- \
		sh -c 'trap "echo got-TSTP" TSTP; trap "echo got-QUIT" QUIT; echo READY
			i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; exit 5')
	expect_eq "$role: Ctrl-Z, Ctrl-\\" "got-TSTP got-QUIT" "$(lines got- "$out")"
	expect_eq "$role: Ctrl-Z, Ctrl-\\: status" 5 "$(report status "$out")"
	expect_clean "$role" "Ctrl-Z, Ctrl-\\" "$out"

	# airlock stopped from outside (SIGTSTP: the terminal's Ctrl-Z is
	# CMD's) gives the terminal its modes back while stopped, and takes
	# raw mode again when continued.
	out=$(ptyal "$role" expect:READY mode killjob:TSTP sleep:0.5 mode killjob:CONT sleep:0.5 mode \
		expect:BYE -- -- sh -c 'echo READY; sleep 2; echo BYE')
	expect_eq "$role: SIGTSTP, SIGCONT: modes" "raw cooked raw" "$(report mode "$out" | tr '\n' ' ' | sed 's/ $//')"
	expect_eq "$role: SIGTSTP, SIGCONT: status" 0 "$(report status "$out")"
	expect_clean "$role" "SIGTSTP, SIGCONT" "$out"

	# What CMD wrote just before it ended reaches the caller in full.
	out=$(ptyal "$role" -- -- sh -c 'i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done')
	expect_eq "$role: output drained" 2000 "$(grep -c '^line [0-9]*$' <<<"$out")"
	expect_eq "$role: output drained, last" "line 1999" "$(grep '^line' <<<"$out" | tail -1)"
done
echo "ok: interactive ($ROLES)"
