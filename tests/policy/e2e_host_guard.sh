#!/usr/bin/env bash
# The address guard follows the host's addresses for the whole run, for
# real in the lab: the supervisor runs in the lab's client namespace (the
# "host"); while `airlock run` (and then `airlock proxy`) is already
# serving, the test gives that namespace an address with a service on it,
# and a name the policy allows (dnsmasq in the lab) resolves there.
#
#   1. late4.test/late6.test's addresses appear on the host's lo: every way
#      to them (explicit absolute-form, CONNECT, transparent; v4 and v6) is
#      refused with the guard's reason, and the log line says so;
#   2. they move to the fake internet (inet) and next4/next6's appear on the
#      host on two interfaces (lo and lab0): late* go through, next* not;
#   3. next* leave lo but stay on lab0: still the host's, still refused;
#   4. next* leave lab0 too and move to inet: they go through.
#
# Every address is added inside the lab's own namespaces (documentation
# ranges, no route out).
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

POL=$LAB_WORK/late.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: host-guard
	allow:
	  - host: late4.test
	    ports: [80]
	  - host: late6.test
	    ports: [80]
	  - host: next4.test
	    ports: [80]
	  - host: next6.test
	    ports: [80]
YAML

SYNC=$LAB_WORK/sync
mkdir -p "$SYNC" "$LAB/srv"

# addr add|del NS DEV ADDR...: change the lab namespace NS's addresses.
# An IPv6 one is added deprecated (preferred_lft 0): still the namespace's
# own address, but never picked as the source of its other connections
# (on lab0 it would be, for the other late/next addresses, and inet has no
# route back to it).
addr() {
	local op=$1 ns=$2 dev=$3 a
	shift 3
	for a in "$@"; do
		case $op-$a in
		add-*:*) lab_in_ns "$LAB" "$ns" ip -6 addr add "$a/128" dev "$dev" nodad preferred_lft 0 ;;
		del-*:*) lab_in_ns "$LAB" "$ns" ip -6 addr del "$a/128" dev "$dev" ;;
		*) lab_in_ns "$LAB" "$ns" ip addr "$op" "$a/32" dev "$dev" ;;
		esac
	done
}

# serve NS LABEL ADDR...: an HTTP server on ADDR:80 in NS whose page says
# LABEL; started once per (NS, ADDR) (a listener stays bound while its
# address comes and goes).
serve() {
	local ns=$1 label=$2 a i
	shift 2
	mkdir -p "$LAB/srv/$label"
	echo "$label" >"$LAB/srv/$label/index.html"
	for a in "$@"; do
		[ -e "$LAB/srv/$ns-$a.up" ] && continue
		lab_spawn "$LAB" "$ns" "$LAB_LOG/srv-$label.out" "$LAB_PYTHON" -m http.server \
			--bind "$a" --directory "$LAB/srv/$label" 80
		for i in $(seq 200); do
			lab_in_ns "$LAB" "$ns" "$LAB_PYTHON" -c 'import socket, sys
socket.create_connection((sys.argv[1], 80), timeout=1).close()' "$a" 2>/dev/null && break
			[ "$i" = 200 ] && fail "the $label server on $a did not come up"
			sleep 0.05
		done
		touch "$LAB/srv/$ns-$a.up"
	done
}

# The lab's host and fake internet in phase N (see the top).
phase_net() {
	case $1 in
	1)
		addr add client lo "$LAB_LATE_V4" "$LAB_LATE_V6"
		serve client host-late "$LAB_LATE_V4" "$LAB_LATE_V6"
		;;
	2)
		addr del client lo "$LAB_LATE_V4" "$LAB_LATE_V6"
		addr add inet lo "$LAB_LATE_V4" "$LAB_LATE_V6"
		serve inet inet-late "$LAB_LATE_V4" "$LAB_LATE_V6"
		addr add client lo "$LAB_NEXT_V4" "$LAB_NEXT_V6"
		addr add client lab0 "$LAB_NEXT_V4" "$LAB_NEXT_V6"
		serve client host-next "$LAB_NEXT_V4" "$LAB_NEXT_V6"
		;;
	3) addr del client lo "$LAB_NEXT_V4" "$LAB_NEXT_V6" ;;
	4)
		addr del client lab0 "$LAB_NEXT_V4" "$LAB_NEXT_V6"
		addr add inet lo "$LAB_NEXT_V4" "$LAB_NEXT_V6"
		serve inet inet-next "$LAB_NEXT_V4" "$LAB_NEXT_V6"
		;;
	esac
}

# Back to no late/next address anywhere (between the run and the proxy).
net_reset() {
	local ns dev a
	for ns in client inet; do
		for dev in lo lab0 lab1; do
			for a in "$LAB_LATE_V4" "$LAB_LATE_V6" "$LAB_NEXT_V4" "$LAB_NEXT_V6"; do
				addr del "$ns" "$dev" "$a" 2>/dev/null || true
			done
		done
	done
}

# What each phase's requests must show: NAME=refused (a 403 from airlock,
# never the host's page) or NAME=LABEL (the page of the server at LABEL).
phase_want() {
	case $1 in
	1) echo "late4=refused late6=refused" ;;
	2) echo "late4=inet-late late6=inet-late next4=refused next6=refused" ;;
	3) echo "next4=refused next6=refused" ;;
	4) echo "next4=inet-next next6=inet-next" ;;
	esac
}

# One request per line: "NAME HOW CONNECT-CODE/HTTP-CODE BODY", HOW one of
# explicit (absolute-form GET), connect (CONNECT, then GET in the tunnel),
# transparent (no proxy: the sandbox's DNS, then the nat redirect; only
# inside airlock run).
cat >"$LAB_WORK/req.sh" <<-'SH'
	# req.sh PROXY TRANSPARENT NAME...: the requests of one phase.
	set -f # "--noproxy *" below is no glob
	px=$1 tp=$2
	shift 2
	for n in "$@"; do
		for how in explicit connect transparent; do
			case $how in
			explicit) a="-x $px" ;;
			connect) a="-p -x $px" ;;
			transparent) [ "$tp" = yes ] || continue; a="--noproxy *" ;;
			esac
			rm -f body
			# shellcheck disable=SC2086 # a holds the options
			code=$(curl -sS --max-time 5 $a -o body -w '%{http_connect}/%{http_code}' \
				"http://$n.test/" 2>/dev/null) || true
			echo "$n $how $code $(head -c 64 body 2>/dev/null | tr -d '\n')"
		done
	done
SH

# check_phase N OUT WHAT: OUT's lines against phase_want N.
check_phase() {
	local n=$1 out=$2 what=$3 w name want line how code body seen
	for w in $(phase_want "$n"); do
		name=${w%%=*} want=${w#*=} seen=0
		while read -r line; do
			read -r _ how code body <<<"$line"
			case $line in "$name "*) ;; *) continue ;; esac
			seen=$((seen + 1))
			if [ "$want" = refused ]; then
				case $code in */403 | 403/*) ;; *)
					fail "$what, phase $n: $name ($how) was not refused: '$line'" ;;
				esac
				case $body in host-*) fail "$what, phase $n: $name ($how) reached the host's service: '$line'" ;; esac
			else
				[ "$body" = "$want" ] ||
					fail "$what, phase $n: $name ($how) did not reach $want: '$line'"
			fi
		done <<<"$out"
		[ "$seen" -ge 2 ] || fail "$what, phase $n: no requests for $name in: $out"
	done
}

# The log lines of a refused name carry the guard's reason, naming the
# address as the host's.
check_logged() {
	local n=$1 what=$2 w name want ip
	for w in $(phase_want "$n"); do
		name=${w%%=*} want=${w#*=}
		[ "$want" = refused ] || continue
		case $name in
		late4) ip=$LAB_LATE_V4 ;; late6) ip=$LAB_LATE_V6 ;;
		next4) ip=$LAB_NEXT_V4 ;; next6) ip=$LAB_NEXT_V6 ;;
		esac
		expect_logged "$what, phase $n: $name refused as the host's" \
			"e.get('host') == '$name.test' and e.get('verdict') == 'deny' and e.get('reason') == 'address-guard' and e.get('detail') == '$ip is one of this host\\'s addresses'"
	done
}

# --- airlock run: explicit and transparent -------------------------------
cat >"$LAB_WORK/inside.sh" <<-SH
	cd "$LAB_WORK"
	touch "$SYNC/ready"
	for n in 1 2 3 4; do
		i=0
		while [ ! -e "$SYNC/go.\$n" ]; do
			i=\$((i + 1)); [ \$i -lt 600 ] || exit 3
			sleep 0.05
		done
		case \$n in
		1) names="late4 late6" ;;
		2) names="late4 late6 next4 next6" ;;
		*) names="next4 next6" ;;
		esac
		sh "$LAB_WORK/req.sh" "\$HTTP_PROXY" yes \$names >"$SYNC/out.\$n.tmp" 2>&1
		mv "$SYNC/out.\$n.tmp" "$SYNC/out.\$n"
	done
SH
airlock_lab "$POL" --timeout 100 -- sh "$LAB_WORK/inside.sh" \
	>"$LAB_WORK/run.out" 2>"$LAB_WORK/run.err" &
run_pid=$!
for i in $(seq 600); do
	[ -e "$SYNC/ready" ] && break
	kill -0 "$run_pid" 2>/dev/null || fail "airlock run ended early: $(cat "$LAB_WORK/run.err")"
	[ "$i" = 600 ] && fail "the command never started: $(cat "$LAB_WORK/run.err")"
	sleep 0.05
done
for n in 1 2 3 4; do
	phase_net "$n"
	touch "$SYNC/go.$n"
	for i in $(seq 600); do
		[ -e "$SYNC/out.$n" ] && break
		[ "$i" = 600 ] && fail "phase $n never finished: $(cat "$LAB_WORK/run.err")"
		sleep 0.05
	done
	out=$(cat "$SYNC/out.$n")
	echo "--- airlock run, phase $n"
	echo "$out"
	check_phase "$n" "$out" "airlock run"
done
wait "$run_pid" || fail "airlock run failed: $(cat "$LAB_WORK/run.err")"
for n in 1 2 3; do check_logged "$n" "airlock run"; done

# --- airlock proxy: explicit only ---------------------------------------
net_reset
: >"$LOGF"
PX=127.0.0.1:3128
"$LAB_SH" exec "$LAB" "${LAB_ENV[@]}" /bin/sh -c 'echo $$ >"$1"; shift; exec "$@"' sh \
	"$LAB_WORK/proxy.pid" "$AIRLOCK" proxy -p "$POL" --listen "$PX" --log "$LOGF" \
	--dns-upstream "$LAB_DNS" 2>"$LAB_LOG/proxy.out" &
for i in $(seq 100); do
	in_lab "$LAB_PYTHON" -c 'import socket; socket.create_connection(("127.0.0.1", 3128), timeout=1)' \
		2>/dev/null && break
	[ "$i" = 100 ] && fail "airlock proxy did not start: $(cat "$LAB_LOG/proxy.out")"
	sleep 0.05
done
for n in 1 2 3 4; do
	phase_net "$n"
	case $n in
	1) names="late4 late6" ;;
	2) names="late4 late6 next4 next6" ;;
	*) names="next4 next6" ;;
	esac
	# shellcheck disable=SC2086 # names is a list
	out=$(cd "$LAB_WORK" && in_lab sh "$LAB_WORK/req.sh" "http://$PX" no $names)
	echo "--- airlock proxy, phase $n"
	echo "$out"
	check_phase "$n" "$out" "airlock proxy"
done
kill -TERM "$(cat "$LAB_WORK/proxy.pid")"
wait
for n in 1 2 3; do check_logged "$n" "airlock proxy"; done
echo "host guard: ok"
