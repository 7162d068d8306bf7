#!/usr/bin/env bash
# No unix socket of the host is reachable from CMD, wherever it lies
# (docs/run.md, Unix sockets): a read-only bind does not stop connect() or
# sendto() on a socket file, so hiding directories can never be complete.
# The test serves stream, seqpacket and datagram sockets (mode 0666) from
# scratch directories under /var/lib, /srv, /opt and the workdir's parent;
# from inside, every way of reaching them (connect, sendto, sendmsg,
# sendmmsg, a relative path, a symlink in the workdir) must fail with
# EACCES, nothing may arrive, and each refusal is one "unix" log line. The
# same probe outside reaches all of them (so it can fail). Sockets CMD
# makes itself (workdir, /tmp, abstract) and socketpair work; a policy's
# `unix:` entry opens exactly the sockets it names. 32-bit x86 programs
# (direct connect, socketcall) are refused too.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_root
need_prog setpriv python3
sbx_setup

PROBE="$TESTS_DIR/sandbox/unixprobe.py"
SERVER="$TESTS_DIR/sandbox/unixserve.py"
DIRS=()
SERVER_PID=
cleanup() {
	[ -z "$SERVER_PID" ] || kill "$SERVER_PID" 2>/dev/null || true
	rm -rf "$SCRATCH" "${DIRS[@]}"
}
trap cleanup EXIT

for base in /var/lib /srv /opt; do
	mkdir -p "$base"
	d=$(mktemp -d "$base/airlock-test-unix.XXXXXX")
	chmod 755 "$d"
	DIRS+=("$d")
done
VL=${DIRS[0]} SRV=${DIRS[1]} OPT=${DIRS[2]}
# The workdirs live in a directory that has sockets of its own.
PARENT=$VL/proj
mkdir -p "$PARENT"
chmod 755 "$PARENT"
for r in $ROLES; do
	mkdir -p "$PARENT/work-$r"
	[ "$r" = self ] || chown "$AIRLOCK_TEST_USER:" "$PARENT/work-$r"
	cp "$PROBE" "$PARENT/work-$r/unixprobe.py"
	chmod 644 "$PARENT/work-$r/unixprobe.py"
	# A host socket the policy opens that lies in the workdir.
	mkdir -p "$PARENT/work-$r/sub"
	chmod 755 "$PARENT/work-$r/sub"
done
subs=()
for r in $ROLES; do subs+=("$PARENT/work-$r/sub"); done

python3 "$SERVER" "$SCRATCH/server.pid" "$VL" "$SRV" "$OPT" "$PARENT" "${subs[@]}" </dev/null &
for _ in $(seq 100); do [ -s "$SCRATCH/server.pid" ] && break; sleep 0.05; done
[ -s "$SCRATCH/server.pid" ] || fail "the socket server did not start"
SERVER_PID=$(cat "$SCRATCH/server.pid")

# airlock run as ROLE in its workdir under PARENT with policy POL.
alu() {
	local role=$1 pol=$2
	shift 2
	(cd "$PARENT/work-$role" && as "$role" "$SCRATCH/airlock" run -p "$pol" \
		--log "$(logf "$role")" -- "$@")
}

PROBE32=
if ${CC:-cc} -m32 -static -nostdlib -ffreestanding -fno-pic -fno-stack-protector -O1 \
	-o "$SCRATCH/probe32" "$TESTS_DIR/sandbox/probe32.c" 2>/dev/null; then
	PROBE32=$SCRATCH/probe32
	chmod 755 "$PROBE32"
else
	echo "note: no -m32 compiler here; the 32-bit probe is not run" >&2
fi

host_ops=()
for d in "$VL" "$SRV" "$OPT" "$PARENT"; do
	host_ops+=("stream:$d/stream.sock" "seqpacket:$d/seq.sock" "dgram-connect:$d/dgram.sock"
		"sendto:$d/dgram.sock" "sendmsg:$d/dgram.sock" "sendmmsg:$d/dgram.sock")
done
# Relative to the workdir: the parent's sockets.
host_ops+=("stream:../stream.sock" "sendto:../dgram.sock")

expect_all() {
	local what=$1 want=$2 out=$3 line
	[ -n "$out" ] || fail "$what: no output"
	while IFS= read -r line; do
		[ "${line##* }" = "$want" ] || fail "$what: expected $want: $line"
	done <<<"$out"
}

events() { cat "$VL/events" "$SRV/events" "$OPT/events" "$PARENT/events" 2>/dev/null || true; }

for role in $ROLES; do
	rm -f "$VL/events" "$SRV/events" "$OPT/events" "$PARENT/events" "$(logf "$role")"
	out=$(alu "$role" "$SCRATCH/none.yaml" python3 ./unixprobe.py "${host_ops[@]}")
	expect_eq "$role: probes" "${#host_ops[@]}" "$(grep -c . <<<"$out")"
	expect_all "$role: host sockets from inside" EACCES "$out"
	expect_eq "$role: nothing reached a host socket" "" "$(events)"
	# One log line per refusal, with the path CMD asked for.
	n=$(grep -c '"kind":"unix".*"verdict":"deny"' "$(logf "$role")" || true)
	expect_eq "$role: unix denials logged" "${#host_ops[@]}" "$n"
	grep -q "\"kind\":\"unix\",\"verdict\":\"deny\",.*\"proto\":\"seqpacket\",\"path\":\"$OPT/seq.sock\"" "$(logf "$role")" ||
		fail "$role: no deny line for $OPT/seq.sock: $(grep '"unix"' "$(logf "$role")" | head -3)"
	grep -q '"path":"../stream.sock"' "$(logf "$role")" ||
		fail "$role: the relative path is not logged as given"

	# Control: the same probe outside reaches every one of them.
	out=$(cd "$PARENT/work-$role" && as "$role" python3 ./unixprobe.py "${host_ops[@]}")
	expect_all "$role: control: host sockets from outside" ok "$out"
	[ -n "$(events)" ] || fail "$role: control: the server saw nothing"

	# CMD's own sockets, in the workdir (relative and absolute) and in /tmp,
	# abstract ones and a socketpair (with an fd passed) work.
	out=$(alu "$role" "$SCRATCH/none.yaml" python3 ./unixprobe.py own:own.sock \
		"own:$PARENT/work-$role/abs.sock" own:/tmp/own.sock pair abstract)
	expect_eq "$role: own probes" 20 "$(grep -c . <<<"$out")"
	expect_all "$role: CMD's own sockets" ok "$out"
	grep -q '"kind":"unix"' "$(logf "$role")" &&
		grep '"kind":"unix"' "$(logf "$role")" | grep -q own.sock &&
		fail "$role: CMD's own socket was logged as a host socket"

	# A policy's unix: entry opens exactly the sockets it names, also through
	# a symlink CMD makes; the others stay closed.
	pol=$SCRATCH/unix-$role.yaml
	printf 'version: 1\nname: unix-test\nunix:\n  - %s\n  - %s\n' \
		"$VL/stream.sock" "$SRV/dgram.sock" >"$pol"
	chmod 644 "$pol"
	rm -f "$VL/events" "$SRV/events" "$OPT/events" "$PARENT/events" "$(logf "$role")"
	out=$(alu "$role" "$pol" sh -c 'ln -sf "$1" link.sock && exec python3 ./unixprobe.py \
		"stream:$1" stream:link.sock "seqpacket:$2" "stream:$3" "sendto:$4" "sendmsg:$4" \
		"sendto:$5"' sh "$VL/stream.sock" "$VL/seq.sock" "$SRV/stream.sock" \
		"$SRV/dgram.sock" "$OPT/dgram.sock")
	expected="stream $VL/stream.sock ok
stream link.sock ok
seqpacket $VL/seq.sock EACCES
stream $SRV/stream.sock EACCES
sendto $SRV/dgram.sock ok
sendmsg $SRV/dgram.sock ok
sendto $OPT/dgram.sock EACCES"
	if [ "$out" != "$expected" ]; then
		diff <(echo "$expected") <(echo "$out") >&2 || true
		fail "$role: policy unix: entries (expected < > got)"
	fi
	expect_eq "$role: what the policy let through" "stream.sock
stream.sock
dgram.sock
dgram.sock" "$(events | sort -r)"
	grep -q "\"kind\":\"unix\",\"verdict\":\"allow\",\"rule\":\"$pol:4\",.*\"method\":\"connect\",.*\"proto\":\"stream\",\"path\":\"$VL/stream.sock\"" "$(logf "$role")" ||
		fail "$role: no allow line naming the rule: $(grep '"unix"' "$(logf "$role")" | head -3)"
	rm -f "$PARENT/work-$role/link.sock"

	# An entry in the workdir: CMD cannot move its directory away and put a
	# symlink to another host socket at its path (the entry would then
	# open that one).
	sub=$PARENT/work-$role/sub
	printf 'version: 1\nname: unix-sub\nunix:\n  - %s\n' "$sub/stream.sock" >"$pol"
	rm -f "$SRV/events" "$sub/events"
	out=$(alu "$role" "$pol" sh -c 'mv sub sub2 2>/dev/null; mkdir -p sub
		ln -sf "$1" sub/stream.sock 2>/dev/null
		exec python3 ./unixprobe.py stream:sub/stream.sock' sh "$SRV/stream.sock")
	expect_eq "$role: the entry in the workdir" "stream sub/stream.sock ok" "$out"
	[ ! -s "$SRV/events" ] || fail "$role: an entry in the workdir was pointed at $SRV/stream.sock"
	[ -s "$sub/events" ] || fail "$role: the entry's own socket was not reached"
	[ ! -e "$PARENT/work-$role/sub2" ] || fail "$role: CMD moved the entry's directory away"

	# Once the log's budget is spent, nothing new goes unrecorded: the
	# entries open nothing any more (a DNS query spends a 1-byte budget;
	# the gate is sealed within a second).
	printf 'version: 1\nname: unix-budget\nunix:\n  - %s\n' "$VL/stream.sock" >"$pol"
	out=$(cd "$PARENT/work-$role" && as "$role" "$SCRATCH/airlock" run -p "$pol" \
		--log "$(logf "$role")" --log-budget 1 -- sh -c 'python3 ./unixprobe.py "stream:$1"
		python3 -c "import socket
try: socket.getaddrinfo(\"spend.test\", 80)
except OSError: pass"
		sleep 1.5; exec python3 ./unixprobe.py "stream:$1"' sh "$VL/stream.sock")
	expect_eq "$role: an entry after the log budget is spent" "stream $VL/stream.sock ok
stream $VL/stream.sock EACCES" "$out"

	# 32-bit x86 programs (direct connect and socketcall) cannot go around
	# the gate: refused too. Only where the compiler can build -m32.
	if [ -n "$PROBE32" ]; then
		cp "$PROBE32" "$PARENT/work-$role/probe32"
		expect_eq "$role: control: 32-bit probe outside" "0
0" "$(cd "$PARENT/work-$role" && as "$role" ./probe32)"
		expect_eq "$role: 32-bit connect, direct and socketcall" "-13
-13" "$(alu "$role" "$SCRATCH/none.yaml" ./probe32)"
	fi
done
echo "ok: unix sockets ($ROLES)"
