#!/usr/bin/env bash
# On a terminal: Ctrl-C reaches CMD exactly once (the terminal signals the
# whole foreground process group; airlock does not pass it on a second
# time), a CMD that does not handle it dies with 130, and the sandbox's
# TIOCSTI is refused on a real terminal.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv python3
sbx_setup

# ptyrun ROLE SCRIPT: run airlock on a new pseudo-terminal, press Ctrl-C
# once CMD printed READY, print CMD's output and airlock's exit status.
ptyrun() {
	local role=$1 script=$2 pre=()
	[ "$role" = user ] && pre=(setpriv --reuid="$AIRLOCK_TEST_USER" --regid="$AIRLOCK_TEST_USER" --init-groups)
	(cd "$(work "$role")" && python3 - "${pre[@]}" "$SCRATCH/airlock" run -p "$SCRATCH/none.yaml" \
		--log "$(logf "$role")" -- sh -c "$script" <<'PY'
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = b""
def pump(until, limit):
    global out
    t = time.time()
    while time.time() - t < limit and (until is None or until not in out):
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                d = os.read(fd, 1024)
            except OSError:
                return
            if not d:
                return
            out += d
pump(b"READY", 10)
os.write(fd, b"\x03")
pump(None, 5)
_, st = os.waitpid(pid, 0)
text = out.decode(errors="replace").replace("\r", "").replace("^C", "")
print(" ".join(l for l in text.split("\n") if l.startswith(("READY", "INT", "STI"))), "exit", os.waitstatus_to_exitcode(st))
PY
	)
}

for role in $ROLES; do
	out=$(ptyrun "$role" 'n=0; trap "n=\$((n+1))" INT; echo READY; sleep 1; echo INT $n; exit 7')
	expect_eq "$role: Ctrl-C once, handled" "READY INT 1 exit 7" "$out"
	out=$(ptyrun "$role" 'echo READY; exec sleep 10')
	expect_eq "$role: Ctrl-C kills CMD" "READY exit 130" "$out"
	out=$(ptyrun "$role" 'python3 -c "
import fcntl, termios, sys
try:
    fcntl.ioctl(sys.stdin.fileno(), termios.TIOCSTI, b\"x\")
    print(\"STI allowed\")
except OSError as e:
    print(\"STI\", e.errno)
"; echo READY; sleep 2')
	expect_eq "$role: TIOCSTI refused on a terminal" "STI 1 READY exit 130" "$out"
done
echo "ok: tty ($ROLES)"
