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
# run *alternately* (ALTERNATE=N rounds, default 300): hyperfine runs each
# command's batch in turn, so on a shared machine a change in load between
# batches can look like a difference between builds. The alternating loop
# spawns each command from Python (posix_spawn + waitpid), which adds a
# little to every figure but the same to all.
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

[ -n "${AIRLOCK_BEFORE:-}" ] || exit 0
ALTERNATE=${ALTERNATE:-300}
echo
echo "alternating, $ALTERNATE rounds, $(date -u +%H:%M) UTC, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
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
for _ in range(rounds):
    for name, argv in cmds:
        t = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=acts)
        _, st = os.waitpid(pid, 0)
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
