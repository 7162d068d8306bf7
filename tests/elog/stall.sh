#!/usr/bin/env bash
# Helper of test_log_stall.sh, run as the role under test: the egress log
# goes to a FIFO whose reader (sleep) never reads. Prints key=value facts.
#   stall.sh run   AIRLOCK POLICY DIR   airlock run --timeout 5, a DNS flood
#                                       fills the pipe, then probes
#   stall.sh proxy AIRLOCK POLICY DIR   airlock proxy, CONNECTs fill it,
#                                       probes, then SIGTERM
set -u
mode=$1 airlock=$2 policy=$3 dir=$4
py=/usr/bin/python3
now() { date +%s%N; }
ms() { echo $((($(now) - $1) / 1000000)); }

rm -f "$dir/fifo"
mkfifo "$dir/fifo"
# The reader holds the pipe open and never reads: the writer's pipe fills.
sleep 60 <"$dir/fifo" &
reader=$!
exec 3>"$dir/fifo"

if [ "$mode" = run ]; then
	cat >"$dir/inside.sh" <<-'SH'
		py=/usr/bin/python3
		$py "$1/flood.py" dns-distinct fill --count 3000 --seconds 6
		t0=$(date +%s%N)
		# Probe until the DNS listener refuses (the log counts as failed);
		# each probe waits at most 1 s for an answer.
		while :; do
			r=$($py "$1/flood.py" query probe.evil.test --timeout 1)
			case $r in rcode=REFUSED*) break ;; esac
			[ $((($(date +%s%N) - t0) / 1000000)) -lt 4000 ] || break
		done
		echo "probe $r after_ms=$((($(date +%s%N) - t0) / 1000000))"
		$py "$1/flood.py" proxy evil.test:443 --count 1 --seconds 3
		sleep 30
	SH
	t0=$(now)
	timeout 40 "$airlock" run -p "$policy" --log /dev/fd/3 --timeout 5 -- \
		sh "$dir/inside.sh" "$dir" >"$dir/run.out" 2>"$dir/run.err"
	echo "rc=$?"
	echo "elapsed_ms=$(ms "$t0")"
	sed 's/^/out: /' "$dir/run.out"
	sed 's/^/err: /' "$dir/run.err"
else
	port=$((20000 + RANDOM % 20000))
	"$airlock" proxy -p "$policy" --listen "127.0.0.1:$port" --log /dev/fd/3 \
		>"$dir/proxy.out" 2>"$dir/proxy.err" &
	pid=$!
	exec 3>&-
	for _ in $(seq 50); do
		grep -q listening "$dir/proxy.err" && break
		sleep 0.1
	done
	$py "$dir/flood.py" proxy-distinct fill --via "127.0.0.1:$port" --count 3000 --seconds 6 |
		sed 's/^/flood: /'
	t0=$(now)
	while :; do
		r=$($py "$dir/flood.py" proxy evil.test:443 --via "127.0.0.1:$port" --count 1 --seconds 2)
		case $r in *"'503'"*) break ;; esac
		[ "$(ms "$t0")" -lt 4000 ] || break
	done
	echo "probe $r after_ms=$(ms "$t0")"
	t0=$(now)
	kill -TERM "$pid"
	# Bounded wait: a supervisor stuck in write(2) must not hang the test.
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "term_ms=$(ms "$t0")"
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid"
		echo "proxy ignored SIGTERM"
	fi
	wait "$pid"
	echo "rc=$?"
	sed 's/^/err: /' "$dir/proxy.err"
fi
exec 3>&-
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
rm -f "$dir/fifo"
