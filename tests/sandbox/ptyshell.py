#!/usr/bin/env python3
"""Run a command on a new pseudo-terminal as an interactive shell runs a job.

The "shell" (a child of this script) is the session leader of a new pty,
its controlling terminal; the job gets its own process group, made the
terminal's foreground group, as bash or dash with job control would. This
script plays the user at the master side: it waits for text, types bytes,
resizes the window, or kills the sandbox's CMD from outside. When the job
has ended, the shell reports what the caller's terminal looks like then.

    ptyshell.py [--stdin-null] [--stdout FILE] [--stderr FILE] [--no-ctty] [--size RxC]
                STEP... -- CMD...

Steps, in order:
    expect:TEXT    wait (10 s at most) until the output contains TEXT
                   after what earlier expects matched
    send:BYTES     type BYTES (Python escapes: \\x03 is Ctrl-C)
    sleep:SECONDS
    resize:RxC     TIOCSWINSZ on the master: the kernel sends SIGWINCH to
                   the terminal's foreground process group
    killcmd:SIG    send SIG to the sandbox's CMD (the supervisor's child's
                   child, airlock being the job's process)
    killjob:SIG    send SIG to the job's process (airlock)
    mode           note whether the terminal is in raw mode now ("@mode
                   raw" or "@mode cooked": ICANON; tcgetattr on a master
                   reads its slave's modes)

Options: --stdin-null gives the job /dev/null as stdin (stdout and stderr
stay the terminal), --stdout FILE and --stderr FILE a file as stdout or
stderr; --no-ctty starts the job in a session of its own, so
its stdin is a terminal that is not its controlling terminal.

Prints the output (carriage returns removed) between "--- output" and
"--- end", then "@key value" lines:
    @status N      the job's exit status (128+N for a signal)
    @fg same|moved the terminal's foreground group after the job ended is
                   still the job's (nothing moved it), or another one
    @pending N     bytes waiting in the terminal's input queue (what the
                   shell would read next: TIOCSTI would put bytes there)
    @termios same|changed   tcgetattr before the job and after
    @flags same|changed     the file status flags (O_NONBLOCK) of the
                   shell's open file description of the terminal
    @timeout TEXT  an expect step that did not match in time
"""
import codecs
import fcntl
import json
import os
import select
import signal
import struct
import sys
import termios
import time

DEADLINE = 40  # the whole run, seconds


def parse(argv):
    opts = {"stdin_null": False, "no_ctty": False, "size": (24, 80), "stdout": None,
            "stderr": None}
    steps = []
    i = 1
    while i < len(argv) and argv[i] != "--":
        a = argv[i]
        if a == "--stdin-null":
            opts["stdin_null"] = True
        elif a == "--no-ctty":
            opts["no_ctty"] = True
        elif a in ("--stdout", "--stderr"):
            i += 1
            opts[a[2:]] = argv[i]
        elif a == "--size":
            i += 1
            r, c = argv[i].split("x")
            opts["size"] = (int(r), int(c))
        else:
            kind, _, arg = a.partition(":")
            if kind not in ("expect", "send", "sleep", "resize", "killcmd", "killjob", "mode"):
                sys.exit("ptyshell.py: unknown step " + a)
            steps.append((kind, arg))
        i += 1
    if i >= len(argv) - 1:
        sys.exit("ptyshell.py: no command")
    return opts, steps, argv[i + 1:]


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def shell(slave, report, opts, cmd):
    """The session leader: starts the job, waits, reports. Never returns."""
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    # A shell ignores SIGTTOU to take the terminal back from a job.
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    before = termios.tcgetattr(0)
    flags = fcntl.fcntl(0, fcntl.F_GETFL)
    job = os.fork()
    if job == 0:
        try:
            if opts["no_ctty"]:
                os.setsid()
            else:
                os.setpgid(0, 0)
                os.tcsetpgrp(0, os.getpid())
            signal.signal(signal.SIGTTOU, signal.SIG_DFL)
            if opts["stdin_null"]:
                null = os.open("/dev/null", os.O_RDONLY)
                os.dup2(null, 0)
                os.close(null)
            for fd, name in ((1, "stdout"), (2, "stderr")):
                if opts[name]:
                    f = os.open(opts[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
                    os.dup2(f, fd)
                    os.close(f)
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    if not opts["no_ctty"]:
        try:
            os.setpgid(job, job)
            os.tcsetpgrp(0, job)
        except OSError:
            pass  # the job did it first
    os.write(report, b"job %d\n" % job)
    _, st = os.waitpid(job, 0)
    res = {
        "status": os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st),
        "fg": "same" if opts["no_ctty"] or os.tcgetpgrp(0) == job else "moved",
        "pending": struct.unpack("i", fcntl.ioctl(0, termios.FIONREAD, b"\0\0\0\0"))[0],
        "termios": "same" if termios.tcgetattr(0) == before else "changed",
        "flags": "same" if fcntl.fcntl(0, fcntl.F_GETFL) == flags else "changed",
    }
    os.write(report, (json.dumps(res) + "\n").encode())
    os._exit(0)


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def main():
    opts, steps, cmd = parse(sys.argv)
    master, slave = os.openpty()
    set_size(master, *opts["size"])
    rd, wr = os.pipe()
    sh = os.fork()
    if sh == 0:
        os.close(master)
        os.close(rd)
        shell(slave, wr, opts, cmd)
    os.close(slave)
    os.close(wr)
    out = b""
    seen = 0  # expect matches after what the last one matched
    reported = b""
    job = None
    notes = []
    end = time.time() + DEADLINE
    master_open = rd_open = True

    def pump(limit):
        """Read the master and the shell's report for up to limit seconds.
        False once both are closed."""
        nonlocal out, reported, job, master_open, rd_open
        fds = ([rd] if rd_open else []) + ([master] if master_open else [])
        if not fds:
            return False
        r, _, _ = select.select(fds, [], [], max(0.0, limit))
        if master in r:
            try:
                d = os.read(master, 65536)
            except OSError:
                d = b""
            if d:
                out += d
            else:
                master_open = False
        if rd in r:
            d = os.read(rd, 65536)
            reported += d
            if job is None and b"\n" in reported:
                job = int(reported.split(b"\n")[0].split()[1])
            if not d:
                rd_open = False
        return True

    for kind, arg in steps:
        if kind == "expect":
            want = codecs.escape_decode(arg.encode())[0]
            t = time.time() + 10
            while want not in out.replace(b"\r", b"")[seen:] and time.time() < t:
                # Until both are closed: the job may end before its last
                # output is read.
                if not pump(min(0.1, t - time.time())):
                    break
            text = out.replace(b"\r", b"")
            at = text.find(want, seen)
            if at < 0:
                notes.append("@timeout " + arg)
                break
            seen = at + len(want)
        elif kind == "send":
            os.write(master, codecs.escape_decode(arg.encode())[0])
        elif kind == "sleep":
            t = time.time() + float(arg)
            while time.time() < t:
                pump(t - time.time())
        elif kind == "resize":
            r, c = arg.split("x")
            set_size(master, int(r), int(c))
        elif kind == "killcmd":
            sup = job
            # The supervisor's children: the logger (elog/logger.h) and init.
            inits = [p for p in children(sup) if comm(p) != "airlock-logger"] if sup else []
            cmds = children(inits[0]) if inits else []
            if not cmds:
                notes.append("@nocmd")
                break
            os.kill(cmds[0], getattr(signal, "SIG" + arg))
        elif kind == "killjob":
            os.kill(job, getattr(signal, "SIG" + arg))
        elif kind == "mode":
            lflag = termios.tcgetattr(master)[3]
            notes.append("@mode " + ("cooked" if lflag & termios.ICANON else "raw"))

    # Let the job end; past the deadline kill it (and so the sandbox).
    while time.time() < end and pump(0.2):
        pass
    if b"{" not in reported:
        notes.append("@deadline")
        if job:
            os.killpg(job, signal.SIGKILL) if not opts["no_ctty"] else os.kill(job, signal.SIGKILL)
        os.kill(sh, signal.SIGKILL)
    os.waitpid(sh, 0)
    text = out.replace(b"\r", b"").decode(errors="replace")
    print("--- output")
    print(text)
    print("--- end")
    for line in reported.split(b"\n"):
        if line.startswith(b"{"):
            for k, v in json.loads(line).items():
                print("@%s %s" % (k, v))
    for n in notes:
        print(n)


main()
