#!/usr/bin/env bash
# The broker against a compromised worker (test_broker.c), in namespaces
# made here: this one with lo, dnsmasq on 127.0.0.1:5353 and 203.0.113.1
# on a veth (the "host's own" address); the veth's peer namespace with
# 203.0.113.10, where the test listens. No route leaves either.
. "$(dirname "$0")/../lib.sh"

if [ "${BROKER_E2E_INNER:-0}" != 1 ]; then
	need_root
	need_prog unshare nsenter ip dnsmasq
	[ -x "${TEST_BROKER:-}" ] || fail "TEST_BROKER is not set"
	export BROKER_E2E_INNER=1
	exec unshare --net -- "$BASH" "$0" "$@"
fi

scratch_dir
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$SCRATCH"
}
trap cleanup EXIT

ip link set lo up
# The peer namespace, held by a sleeper (bounded: the test takes seconds).
unshare --net -- sleep 300 &
PEER=$!
PIDS+=("$PEER")
for _ in $(seq 100); do
	[ "$(readlink "/proc/$PEER/ns/net")" != "$(readlink /proc/self/ns/net)" ] && break
	sleep 0.02
done
[ "$(readlink "/proc/$PEER/ns/net")" != "$(readlink /proc/self/ns/net)" ] ||
	fail "the peer namespace did not appear"
ip link add br0 type veth peer name br1 netns "$PEER"
ip addr add 203.0.113.1/24 dev br0
ip link set br0 up
nsenter --net="/proc/$PEER/ns/net" -- sh -c \
	'ip link set lo up && ip addr add 203.0.113.10/24 dev br1 && ip link set br1 up'

dnsmasq --keep-in-foreground --no-resolv --no-hosts --user=root --group=root \
	--conf-file=/dev/null --listen-address=127.0.0.1 --bind-interfaces --port=5353 \
	--pid-file="$SCRATCH/dnsmasq.pid" --log-facility="$SCRATCH/dnsmasq.log" \
	--local=/test/ --address=/allowed.test/203.0.113.10 \
	--address=/rebind.test/127.0.0.1 \
	--address=/meta.test/169.254.169.254 \
	--address=/own.test/203.0.113.1 \
	--address=/dc.test/198.51.100.66 \
	--address=/sub.evil.test/203.0.113.10 &
PIDS+=($!)
for _ in $(seq 100); do
	[ -s "$SCRATCH/dnsmasq.pid" ] && break
	sleep 0.05
done
[ -s "$SCRATCH/dnsmasq.pid" ] || fail "dnsmasq did not start: $(cat "$SCRATCH/dnsmasq.log" 2>/dev/null)"

BROKER_PEER_NS="/proc/$PEER/ns/net" BROKER_DNS=127.0.0.1:5353 "$TEST_BROKER"
