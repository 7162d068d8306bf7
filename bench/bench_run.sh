#!/usr/bin/env bash
# Start-up cost of a sandbox: `airlock run -p none -- true` against what a
# user would otherwise pick, side by side in one hyperfine run:
#   unshare -Urnmpf --mount-proc true          (bare namespaces, no policy)
#   bwrap --unshare-all --ro-bind / / true     (bubblewrap, no network policy)
#   bwrap ... --dev /dev --proc /proc --tmpfs /tmp true  (closer to airlock's view)
# airlock does more per run (nftables ruleset, listeners handed to the
# supervisor, the proxy/DNS event loop, a policy, an egress log); the point
# is what that costs. Results: bench/run.md.
#
#   bench/bench_run.sh [RUNS]        (default 50; AIRLOCK=path/to/airlock)
# Optional, in the same hyperfine run for before/after comparisons:
#   AIRLOCK_BEFORE=path/to/older/airlock  AIRLOCK_STATIC=path/to/static/airlock
# With AIRLOCK_BEFORE, the airlock builds, unshare and bwrap are then also
# run *interleaved* (ALTERNATE=N runs of each, default 300, rounded down to
# a multiple of 10): hyperfine runs each command's batch in turn, so on a
# shared machine a change in load between batches can look like a
# difference between builds. The commands take turns in blocks of 10 runs;
# the first run of a block is not counted, as it pays for what the previous
# command left to the kernel (bwrap's pid 1 still exiting, a network
# namespace being freed), which in a plain round-robin would always land on
# the same neighbour. The loop spawns each command from Python (posix_spawn
# + waitpid), which adds a little to every figure but the same to all.
# Always, after hyperfine: each run split into set-up and end, and what each
# tool leaves for its caller to reap (SPLIT=N runs of each, default 200,
# interleaved the same way).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
AIRLOCK=${AIRLOCK:-$SRC/build/cli/airlock}
RUNS=${1:-50}
command -v hyperfine >/dev/null || { echo "hyperfine is not installed" >&2; exit 1; }
command -v bwrap >/dev/null || { echo "bwrap is not installed" >&2; exit 1; }
[ -x "$AIRLOCK" ] || { echo "no airlock at $AIRLOCK (set AIRLOCK=)" >&2; exit 1; }

SCRATCH=$(mktemp -d /tmp/airlock-bench-run.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
POLICY=$SRC/policies/none.yaml
if [ ! -f "$POLICY" ]; then
	POLICY=$SCRATCH/none.yaml
	printf 'version: 1\nname: none\n' >"$POLICY"
fi
# The working directory becomes the sandbox's read-write workdir.
mkdir "$SCRATCH/work"
cd "$SCRATCH/work"

extra=()
if [ -n "${AIRLOCK_STATIC:-}" ]; then
	extra+=(-n "airlock (static libs) run -p none -- true"
		"$AIRLOCK_STATIC run -p $POLICY --log $SCRATCH/egress.jsonl -- true")
fi
if [ -n "${AIRLOCK_BEFORE:-}" ]; then
	extra+=(-n "airlock (before) run -p none -- true"
		"$AIRLOCK_BEFORE run -p $POLICY --log $SCRATCH/egress.jsonl -- true")
fi

echo "bench_run: $RUNS runs each, $(nproc) CPUs, kernel $(uname -r), uid $(id -u), $(date -u +%H:%M) UTC"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
hyperfine -N --runs "$RUNS" --warmup 5 --export-json "$SCRATCH/run.json" \
	-n "airlock run -p none -- true" \
	"$AIRLOCK run -p $POLICY --log $SCRATCH/egress.jsonl -- true" \
	"${extra[@]}" \
	-n "unshare -Urnmpf --mount-proc true" \
	"unshare -Urnmpf --mount-proc true" \
	-n "bwrap --unshare-all --ro-bind / / true" \
	"bwrap --unshare-all --ro-bind / / true" \
	-n "bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp true" \
	"bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp true" \
	>"$SCRATCH/hyperfine.txt" 2>&1 || { cat "$SCRATCH/hyperfine.txt" >&2; exit 1; }

python3 - "$SCRATCH/run.json" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
med = {r["command"]: r["median"] * 1000 for r in res}
names = [r["command"] for r in res]
air = med[names[0]]
print(f"{'command':<80} {'median':>9} {'min':>8} {'max':>8}  airlock/this")
for r in res:
    m = r["median"] * 1000
    print(f"{r['command']:<80} {m:7.1f}ms {r['min']*1000:6.1f}ms {r['max']*1000:6.1f}ms  {air/m:5.2f}x")
uns = med["unshare -Urnmpf --mount-proc true"]
bw = med["bwrap --unshare-all --ro-bind / / true"]
print(f"target: airlock median < 2x unshare ({2*uns:.1f} ms): {'yes' if air < 2*uns else 'NO'}; "
      f"< bwrap ({bw:.1f} ms): {'yes' if air < bw else 'NO'}")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# Where the time goes, and what each tool leaves behind. CMD is
# `date +%s%N`: the time it prints splits each run into set-up (spawn to
# CMD's clock read, which includes CMD's own start) and end (to the tool's
# return). The runs are made by a child subreaper, as a container's init or
# systemd --user would make them, so anything a tool leaves behind when it
# returns (dead or alive) comes to us. It is counted and reaped, and "gone"
# is the time from spawn until then: the sandbox's whole life.
SPLIT=${SPLIT:-200}
echo
echo "set-up, end, and until nothing is left: $SPLIT runs of each, interleaved, $(date -u +%H:%M) UTC"
python3 - "$SPLIT" "$POLICY" "$SCRATCH/egress.jsonl" "$AIRLOCK" <<'PY'
import ctypes, os, shutil, signal, statistics, sys, time
rounds, policy, log, air = int(sys.argv[1]), *sys.argv[2:5]
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("cannot become a child subreaper")
date = [shutil.which("date"), "+%s%N"]
cmds = [("airlock", [air, "run", "-p", policy, "--log", log, "--"] + date),
        ("unshare", [shutil.which("unshare"), "-Urnmpf", "--mount-proc"] + date),
        ("bwrap", [shutil.which("bwrap"), "--unshare-all", "--ro-bind", "/", "/"] + date)]
null = os.open("/dev/null", os.O_RDWR)
def stuck(*_):
    # Ours now, so ours to end: every child left (the tools were reaped).
    for stat in os.listdir("/proc"):
        try:
            with open(f"/proc/{stat}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                    os.kill(int(stat), signal.SIGKILL)
        except (ValueError, OSError, IndexError):
            pass
    sys.exit("a process left behind did not end within 5 s; killed")
signal.signal(signal.SIGALRM, stuck)
ms = {n: {"set-up": [], "end": [], "total": [], "gone": []} for n, _ in cmds}
left = {n: 0 for n, _ in cmds}
runs = {n: 0 for n, _ in cmds}
for name, argv in [c for _ in range(max(1, rounds // 10)) for c in cmds for _ in range(11)]:
    rd, wr = os.pipe()
    t0 = time.time_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[
        (os.POSIX_SPAWN_DUP2, wr, 1), (os.POSIX_SPAWN_DUP2, null, 2), (os.POSIX_SPAWN_CLOSE, rd)])
    os.close(wr)
    _, st = os.waitpid(pid, 0)
    t2 = time.time_ns()
    # A child of ours now is something the tool left behind: wait
    # for it (and whatever else it left) to end.
    t3 = t2
    signal.alarm(5)
    try:
        while True:
            os.waitid(os.P_ALL, 0, os.WEXITED)
            t3 = time.time_ns()
            left[name] += 1
    except ChildProcessError:
        pass
    signal.alarm(0)
    out = os.read(rd, 64)
    os.close(rd)
    if st != 0:
        sys.exit(f"{name} failed: wait status {st}")
    t1 = int(out)
    runs[name] += 1
    if runs[name] % 11 == 1:
        continue  # first of its block
    for k, v in (("set-up", t1 - t0), ("end", t2 - t1), ("total", t2 - t0), ("gone", t3 - t0)):
        ms[name][k].append(v / 1e6)
print(f"{'command':<10} {'set-up':>8} {'end':>8} {'total':>8} {'gone':>8}  processes left to the caller")
for name, _ in cmds:
    m = {k: statistics.median(v) for k, v in ms[name].items()}
    print(f"{name:<10} {m['set-up']:6.2f}ms {m['end']:6.2f}ms {m['total']:6.2f}ms {m['gone']:6.2f}ms  "
          f"{left[name]} in {runs[name]} runs")
PY

[ -n "${AIRLOCK_BEFORE:-}" ] || exit 0
ALTERNATE=${ALTERNATE:-300}
echo
echo "interleaved, $ALTERNATE runs of each, $(date -u +%H:%M) UTC, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$ALTERNATE" "$POLICY" "$SCRATCH/egress.jsonl" "$AIRLOCK" "$AIRLOCK_BEFORE" \
	"${AIRLOCK_STATIC:-}" <<'PY'
import os, shutil, statistics, sys, time
rounds, policy, log, new, before, static = int(sys.argv[1]), *sys.argv[2:7]
tru = shutil.which("true")
cmds = [("airlock", [new, "run", "-p", policy, "--log", log, "--", tru]),
        ("airlock (before)", [before, "run", "-p", policy, "--log", log, "--", tru])]
if static:
    cmds.append(("airlock (static libs)", [static, "run", "-p", policy, "--log", log, "--", tru]))
cmds += [("unshare", [shutil.which("unshare"), "-Urnmpf", "--mount-proc", tru]),
         ("bwrap", [shutil.which("bwrap"), "--unshare-all", "--ro-bind", "/", "/", tru])]
null = os.open("/dev/null", os.O_RDWR)
acts = [(os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)]
ms = {name: [] for name, _ in cmds}
for _ in range(max(1, rounds // 10)):
    for name, argv in cmds:
        for i in range(11):
            t = time.perf_counter()
            pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=acts)
            _, st = os.waitpid(pid, 0)
            if i > 0:  # the first of a block pays for its predecessor
                ms[name].append((time.perf_counter() - t) * 1000)
            if st != 0:
                sys.exit(f"{name} failed: wait status {st}")
med = {name: statistics.median(v) for name, v in ms.items()}
print(f"{'command':<24} {'median':>8} {'p10':>7} {'p90':>7} {'min':>7}  airlock/this")
for name, v in ms.items():
    v.sort()
    n = len(v)
    print(f"{name:<24} {med[name]:6.2f}ms {v[n // 10]:5.2f}ms {v[9 * n // 10]:5.2f}ms "
          f"{v[0]:5.2f}ms  {med['airlock'] / med[name]:5.2f}x")
print(f"target: airlock median < 2x unshare ({2 * med['unshare']:.2f} ms): "
      f"{'yes' if med['airlock'] < 2 * med['unshare'] else 'NO'}; < bwrap ({med['bwrap']:.2f} ms): "
      f"{'yes' if med['airlock'] < med['bwrap'] else 'NO'}")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
