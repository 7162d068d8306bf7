#!/usr/bin/env bash
# What --ids range and --overlay cost at start-up (docs/run.md "Writable
# root"), and that a run without them costs what it did: one hyperfine run,
# side by side,
#   BEFORE -p none -- true                   (an older airlock, if given)
#   airlock -p none -- true                  (this build, no new option)
#   airlock -p none --overlay -- true
#   airlock -p none --ids range --root -- true
#   airlock -p none --ids range --root --overlay -- true
#
#   bench/bench_overlay.sh [RUNS]   (default 100; AIRLOCK=, AIRLOCK_BEFORE=)
# Results: bench/run.md, "Ids and overlay".
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
AIRLOCK=${AIRLOCK:-$SRC/build/cli/airlock}
RUNS=${1:-100}
command -v hyperfine >/dev/null || { echo "hyperfine is not installed" >&2; exit 1; }
[ -x "$AIRLOCK" ] || { echo "no airlock at $AIRLOCK (set AIRLOCK=)" >&2; exit 1; }
SCRATCH=$(mktemp -d /tmp/airlock-bench-overlay.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
printf 'version: 1\nname: none\n' >"$SCRATCH/none.yaml"
# airlock refuses a binary with two links; copies also keep both on one fs.
cp "$AIRLOCK" "$SCRATCH/airlock"
cmds=()
if [ -n "${AIRLOCK_BEFORE:-}" ]; then
	cp "$AIRLOCK_BEFORE" "$SCRATCH/before"
	cmds+=(-n before "$SCRATCH/before run -q -p $SCRATCH/none.yaml --log /dev/null -- true")
fi
run="$SCRATCH/airlock run -q -p $SCRATCH/none.yaml --log /dev/null"
cmds+=(-n plain "$run -- true"
	-n overlay "$run --overlay -- true"
	-n ids-range "$run --ids range --root -- true")
# Rootless the range goes through newuidmap (two more programs per run).
cmds+=(-n ids-range+overlay "$run --ids range --root --overlay -- true")
cd "$SCRATCH"
hyperfine -N --warmup 10 --runs "$RUNS" "${cmds[@]}"
