#!/usr/bin/env bash
# The unix socket gate makes CMD's connect and send calls with the
# supervisor's credentials, which hold every capability in the sandbox's
# user namespace. What CMD may not do itself it must not get through the
# gate: netlink messages to other sockets' ports (a forged NFLOG packet
# line in the log, a forged unix_diag answer that makes a host socket look
# like CMD's own) and control messages that need a capability (SO_MARK).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
need_prog python3 setpriv
sbx_setup

for role in $ROLES; do
	w=$(work "$role")
	rm -f "$w/pid" "$(logf "$role")"
	cp "$(dirname "$0")/nlforge.py" "$w/nlforge.py" # /tmp is the sandbox's own
	chmod 644 "$w/nlforge.py"
	al "$role" -- python3 nlforge.py pid >"$SCRATCH/out-$role" 2>&1 &
	apid=$!
	# The supervisor's pid is the port id of the NFLOG socket it bound.
	sleep 0.3
	echo "$apid" >"$w/pid.tmp"
	mv "$w/pid.tmp" "$w/pid"
	wait "$apid" || fail "$role: airlock exited $?: $(cat "$SCRATCH/out-$role")"
	# 1 = EPERM, as the kernel answers a process without CAP_NET_ADMIN.
	expect_eq "$role: netlink to other ports, SO_MARK" "nflog 1 port1 1 mark 1" \
		"$(grep '^nflog' "$SCRATCH/out-$role")"
	if grep -q 198.51.100.77 "$(logf "$role")"; then
		fail "$role: a forged packet line reached the log"
	fi
done
echo "ok: netlink ($ROLES)"
