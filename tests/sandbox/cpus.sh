#!/usr/bin/env bash
# On an idle machine of two CPUs or more, set-up is split: the supervisor
# pinned to one CPU, init to the others, until the go (sandbox.c,
# split_cpus_prepare). What the supervisor forks meanwhile (the broker, the
# worker) must not keep that pinning: it would set itself up on the
# supervisor's CPU, and then serve the whole run on one CPU. The machine is
# made to look idle to airlock alone: /proc/loadavg, which it reads to
# decide, says so through an LD_PRELOAD shim (idleload.c).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_root
need_prog pgrep
[ "$(nproc)" -ge 2 ] || skip "one CPU: set-up is never split"
sbx_setup
[ -n "${IDLELOAD:-}" ] && [ -f "$IDLELOAD" ] || skip "IDLELOAD shim not built"
cp "$IDLELOAD" "$SCRATCH/idleload.so"
# A sanitizer build's runtime need not come first for this shim.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

mine=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)

cpus_of() { awk '/^Cpus_allowed_list/ {print $2}' "/proc/$1/status" 2>/dev/null; }

(cd "$(work self)" && LD_PRELOAD="$SCRATCH/idleload.so" exec "$SCRATCH/airlock" run \
	-p "$SCRATCH/none.yaml" --log "$(logf self)" -- sleep 3) &
sup=$!
broker="" worker=""
for _ in $(seq 100); do
	broker=$(pgrep -x airlock-broker -P "$sup" || true)
	worker=$(pgrep -x airlock-worker -P "$sup" || true)
	[ -n "$broker" ] && [ -n "$worker" ] && break
	sleep 0.05
done
[ -n "$broker" ] && [ -n "$worker" ] || { kill "$sup"; fail "no broker or worker under $sup"; }
sleep 0.2 # past the go
got_sup=$(cpus_of "$sup") got_broker=$(cpus_of "$broker") got_worker=$(cpus_of "$worker")
wait "$sup" || fail "airlock run failed"
expect_eq "the supervisor's CPUs after the go" "$mine" "$got_sup"
expect_eq "the broker's CPUs" "$mine" "$got_broker"
expect_eq "the worker's CPUs" "$mine" "$got_worker"
echo "ok: broker, worker and supervisor on CPUs $mine"
