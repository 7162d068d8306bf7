#!/usr/bin/env python3
# Start-up with a terminal: airlock run -p none -- true with stdin and stdout a
# fresh pty (CMD then gets a terminal of its own), interleaved blocks of 11
# runs per binary, the first of each block not counted; median and min.
#   bench/bench_run_tty.py AIRLOCK [AIRLOCK_BEFORE ...]  (needs /tmp/none.yaml:
#   printf "version: 1\nname: none\n" >/tmp/none.yaml)
import os, pty, statistics, sys, time
bins = sys.argv[1:]
res = {b: [] for b in bins}
def once(b):
    t = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(b, [b, "run", "-p", "/tmp/none.yaml", "--log", "/tmp/x.jsonl", "--", "true"])
    while True:
        try:
            if not os.read(fd, 4096):
                break
        except OSError:
            break
    os.waitpid(pid, 0)
    os.close(fd)
    return (time.perf_counter() - t) * 1000
for blk in range(20):
    for b in bins:
        for i in range(11):
            d = once(b)
            if i:
                res[b].append(d)
for b in bins:
    print(f"{statistics.median(res[b]):.3f} ms median, {min(res[b]):.3f} min  {b}")
