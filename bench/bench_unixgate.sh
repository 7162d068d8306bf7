#!/usr/bin/env bash
# The unix socket gate's cost (docs/run.md, Unix sockets): every connect()
# and sendmsg() of CMD's is a seccomp notification that the supervisor
# answers by making the call itself. bench-connect-loop runs N TCP connects
# to a listener of its own on 127.0.0.1 inside `airlock run` (nothing
# leaves the sandbox), then N one-byte sendmsg() calls; this script runs it
# under two builds taking turns, ROUNDS rounds, and prints the medians.
# Results: bench/run.md.
#
#   AIRLOCK_BEFORE=/path/to/old/airlock bench/bench_unixgate.sh [ROUNDS] [N]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
AIRLOCK=${AIRLOCK:-$SRC/build/cli/airlock}
BEFORE=${AIRLOCK_BEFORE:?set AIRLOCK_BEFORE to the build to compare with}
LOOP=${LOOP:-$SRC/build/bench/bench-connect-loop}
ROUNDS=${1:-11}
N=${2:-1000}
SCRATCH=$(mktemp -d /tmp/airlock-bench-unixgate.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
printf 'version: 1\nname: none\n' >"$SCRATCH/none.yaml"
cp "$LOOP" "$SCRATCH/loop"
cd "$SCRATCH"
echo "bench_unixgate: $ROUNDS rounds of $N, $(nproc) CPUs, kernel $(uname -r), $(date -u +%H:%M) UTC"
for i in $(seq "$ROUNDS"); do
	for b in before after; do
		bin=$AIRLOCK
		[ "$b" = after ] || bin=$BEFORE
		"$bin" run -p "$SCRATCH/none.yaml" --log "$SCRATCH/log" -- ./loop "$N" |
			sed "s/^/$b /" >>"$SCRATCH/results"
	done
done
python3 - "$SCRATCH/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    b, _, c, _, s = line.split()
    rows.setdefault(b, ([], []))
    rows[b][0].append(float(c))
    rows[b][1].append(float(s))
for b in ("before", "after"):
    c, s = rows[b]
    print("%-6s connect %.2f us (min %.2f)  sendmsg %.2f us (min %.2f)  median of %d" %
          (b, statistics.median(c), min(c), statistics.median(s), min(s), len(c)))
PY
