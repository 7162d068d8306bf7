#!/usr/bin/env bash
# Host unix sockets are out of CMD's reach where they usually live: a
# read-only bind does not stop connect() on a pathname socket, so the home
# directories (ssh ControlMaster, ~/.docker), /var/tmp and the daemon dirs
# are empty tmpfs inside. A socket server the test starts outside, in a
# scratch home under the role's real home, must be unreachable by default,
# still unreachable with --share-home (the unix socket gate: unix.sh), and
# reachable with --share-home or --ro of the socket when the policy's
# unix: list names it (which proves the probe can fail). The working
# directory inside the home and --ro PATH come back on top.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog setpriv python3
sbx_setup

HOMES=()
PIDS=()
SOCKS=()
cleanup() {
	local p
	# The servers' own pids: `as ... &` is a subshell whose child is the
	# server, so $! alone would leave it running (and holding our stdout).
	for p in "${PIDS[@]}" $(cat "${SOCKS[@]/%/.pid}" 2>/dev/null); do
		kill "$p" 2>/dev/null || true
	done
	rm -rf "$SCRATCH" "${HOMES[@]}"
}
trap cleanup EXIT

# A unix socket server answering "host-daemon" to every client, for at most
# 60 s. Runs as ROLE; waits until the socket exists.
serve() {
	local role=$1 path=$2
	as "$role" python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(8); s.settimeout(60)
with open(sys.argv[1] + ".pid", "w") as f:
    f.write("%d\n" % os.getpid())
try:
    while True:
        c, _ = s.accept(); c.sendall(b"host-daemon\n"); c.close()
except OSError:
    pass
' "$path" &
	PIDS+=($!)
	SOCKS+=("$path")
	for _ in $(seq 100); do [ -S "$path" ] && return 0; sleep 0.05; done
	fail "$role: socket server did not start on $path"
}

probe='
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(3)
try:
    s.connect(sys.argv[1]); print(s.recv(64).decode().strip())
except OSError as e:
    print("unreachable")
'

# airlock run as ROLE with HOME=H, in DIR.
alh() {
	local role=$1 h=$2 dir=$3
	shift 3
	(cd "$dir" && as "$role" env HOME="$h" "$SCRATCH/airlock" run -p "${POL:-$SCRATCH/none.yaml}" \
		--log "$(logf "$role")" "$@")
}

body() {
	local role=$1 rhome h vt out
	if [ "$role" = user ]; then
		rhome=$(getent passwd "$AIRLOCK_TEST_USER" | cut -d: -f6)
	else
		rhome=${HOME:-$(getent passwd "$(id -un)" | cut -d: -f6)}
	fi
	[ -d "$rhome" ] && as "$role" test -w "$rhome" || skip "$role: home $rhome not writable"
	h=$(as "$role" mktemp -d "$rhome/.airlock-test.XXXXXX")
	HOMES+=("$h")
	as "$role" mkdir -p "$h/.ssh" "$h/proj"
	as "$role" sh -c "echo '[user]' > '$h/.gitconfig'"
	serve "$role" "$h/.ssh/ctl.sock"
	vt=$(as "$role" mktemp -d /var/tmp/airlock-test.XXXXXX)
	HOMES+=("$vt")
	serve "$role" "$vt/host.sock"

	# The control: outside, and inside with --share-home or --ro of the
	# socket and a policy that names it, it answers.
	expect_eq "$role: control outside" host-daemon "$(as "$role" python3 -c "$probe" "$h/.ssh/ctl.sock")"
	printf 'version: 1\nunix: [%s]\n' "$h/.ssh/ctl.sock" >"$SCRATCH/ctl-$role.yaml"
	chmod 644 "$SCRATCH/ctl-$role.yaml"
	out=$(POL=$SCRATCH/ctl-$role.yaml alh "$role" "$h" "$(work "$role")" --share-home -- \
		python3 -c "$probe" "$h/.ssh/ctl.sock")
	expect_eq "$role: --share-home and unix: reach the home socket" host-daemon "$out"
	out=$(POL=$SCRATCH/ctl-$role.yaml alh "$role" "$h" "$(work "$role")" --ro "$h/.ssh/ctl.sock" -- \
		python3 -c "$probe" "$h/.ssh/ctl.sock")
	expect_eq "$role: --ro of the socket and unix: reach it" host-daemon "$out"
	out=$(alh "$role" "$h" "$(work "$role")" --share-home -- python3 -c "$probe" "$h/.ssh/ctl.sock")
	expect_eq "$role: --share-home alone does not reach the home socket" unreachable "$out"

	# By default: the home is an empty writable tmpfs, the socket gone.
	out=$(alh "$role" "$h" "$(work "$role")" -- python3 -c "$probe" "$h/.ssh/ctl.sock")
	expect_eq "$role: home socket hidden" unreachable "$out"
	out=$(alh "$role" "$h" "$(work "$role")" -- python3 -c "$probe" "$vt/host.sock")
	expect_eq "$role: /var/tmp socket hidden" unreachable "$out"
	out=$(alh "$role" "$h" "$(work "$role")" --share-home -- python3 -c "$probe" "$vt/host.sock")
	expect_eq "$role: /var/tmp socket hidden with --share-home" unreachable "$out"
	# $0: the role's home directory name, which /home holds as the way to
	# the scratch home when the role is an ordinary user.
	out=$(alh "$role" "$h" "$(work "$role")" -- sh -c \
		'ls -A "$HOME" | wc -l; mkdir -p "$HOME/.cache/pip" && echo c > "$HOME/.cache/pip/x" && echo cache-ok; ls -A /root /home | grep -vxF -e "/root:" -e "/home:" -e "" -e "$0" | grep -v "^\.airlock-test\." | grep -c . || true' \
		"$(basename "$rhome")")
	# /root and /home hold only the way to the scratch home.
	expect_eq "$role: empty writable home, /root and /home empty" "0
cache-ok
0" "$out"
	[ -e "$h/.cache" ] && fail "$role: a cache write inside reached the host home"

	# The working directory inside the home is there, read-write.
	out=$(alh "$role" "$h" "$h/proj" -- sh -c 'echo w > out; pwd; ls -A "$HOME"; python3 -c "$0" "$HOME/.ssh/ctl.sock"' "$probe")
	expect_eq "$role: workdir inside the home" "$h/proj
proj
unreachable" "$out"
	expect_eq "$role: workdir write reaches the host" w "$(cat "$h/proj/out")"

	# --ro brings one file back, read-only.
	out=$(alh "$role" "$h" "$(work "$role")" --ro "$h/.gitconfig" -- sh -c \
		'cat "$HOME/.gitconfig"; (echo x >> "$HOME/.gitconfig") 2>/dev/null && echo writable; true')
	expect_eq "$role: --ro ~/.gitconfig" "[user]" "$out"

	# A HOME that is a system directory is not hidden (it would take the
	# system with it), and airlock says so.
	out=$(alh "$role" /usr "$(work "$role")" -- sh -c 'ls /usr/bin | grep -cx sh' 2>"$SCRATCH/err-$role") ||
		fail "$role: HOME=/usr: the run failed: $(cat "$SCRATCH/err-$role")"
	expect_eq "$role: HOME=/usr leaves /usr in place" 1 "$out"
	expect_match "$role: HOME=/usr is said" "HOME /usr is a system directory" "$(cat "$SCRATCH/err-$role")"

	# CMD found on the host in a PATH entry under the hidden home is said,
	# with the way back; brought back with --ro, it runs and is not said.
	as "$role" mkdir -p "$h/.local/bin"
	as "$role" sh -c "printf '#!/bin/sh\necho mytool\n' > '$h/.local/bin/mytool'; chmod 755 '$h/.local/bin/mytool'"
	PATH="$h/.local/bin:$PATH" alh "$role" "$h" "$(work "$role")" -- mytool >/dev/null 2>"$SCRATCH/err-$role" &&
		fail "$role: mytool ran from the hidden home"
	expect_match "$role: CMD in a hidden PATH entry is said" \
		"mytool is $h/.local/bin/mytool on the host, in .*hidden inside.*--ro $h/.local/bin" \
		"$(cat "$SCRATCH/err-$role")"
	out=$(PATH="$h/.local/bin:$PATH" alh "$role" "$h" "$(work "$role")" --ro "$h/.local/bin" -- mytool 2>"$SCRATCH/err-$role")
	expect_eq "$role: --ro brings the PATH entry back" mytool "$out"
	! grep -q "hidden inside" "$SCRATCH/err-$role" || fail "$role: warning despite --ro: $(cat "$SCRATCH/err-$role")"
	# A hidden entry CMD does not come from is said with -v only.
	PATH="$h/.local/bin:$PATH" alh "$role" "$h" "$(work "$role")" -- true 2>"$SCRATCH/err-$role"
	! grep -q "hidden inside" "$SCRATCH/err-$role" || fail "$role: a PATH line without -v: $(cat "$SCRATCH/err-$role")"
	PATH="$h/.local/bin:$PATH" alh "$role" "$h" "$(work "$role")" -v -- true 2>"$SCRATCH/err-$role"
	expect_match "$role: -v names the hidden PATH entry" "PATH entry $h/.local/bin is in .*hidden inside" \
		"$(cat "$SCRATCH/err-$role")"
}

for role in $ROLES; do
	body "$role"
done
echo "ok: home ($ROLES)"
