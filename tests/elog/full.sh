#!/usr/bin/env bash
# Helper of test_log_full.sh, run as root in a private mount namespace
# (unshare -m): mounts a 1 MiB tmpfs on DIR, nearly fills it, and runs
# airlock as USER ("" for root) with its egress log there:
#   1. airlock run, a DNS flood of distinct names fills the disk;
#   2. the filler is removed and one more run appends to the same log;
#   3. airlock proxy, CONNECTs fill the disk again, then SIGTERM.
# Copies the logs to OUT (the tmpfs dies with the namespace) and prints
# key=value facts and airlock's stderr.
#   full.sh AIRLOCK POLICY DIR OUT USER
set -u
airlock=$1 policy=$2 dir=$3 out=$4 user=$5
py=/usr/bin/python3
as=()
[ -n "$user" ] && as=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --)

fill() {
	local free
	rm -f "$dir/filler"
	# All but about 64 KiB: the flood fills the rest quickly.
	free=$(df --output=avail -B 4096 "$dir" | tail -n 1)
	dd if=/dev/zero of="$dir/filler" bs=4096 count=$((free - 16)) status=none
}

mount -t tmpfs -o size=1m,mode=0755 tmpfs "$dir" || exit 1
[ -n "$user" ] && chown "$user:" "$dir"
fill
# The sandbox sees its working directory (OUT); its /tmp is its own.
cd "$out" || exit 1

"${as[@]}" "$airlock" run -p "$policy" --log "$dir/run.jsonl" -- \
	$py "$out/flood.py" dns-distinct full --count 3000 --seconds 10 >"$out/full.out" 2>"$out/full.err"
echo "run rc=$?"
sed 's/^/run out: /' "$out/full.out"
sed 's/^/run err: /' "$out/full.err"
cp "$dir/run.jsonl" "$out/run-full.jsonl"

rm -f "$dir/filler"
"${as[@]}" "$airlock" run -p "$policy" --log "$dir/run.jsonl" -- \
	$py "$out/flood.py" query again.evil.test >/dev/null 2>"$out/again.err"
echo "again rc=$?"
sed 's/^/again err: /' "$out/again.err"
cp "$dir/run.jsonl" "$out/run-again.jsonl"
rm -f "$dir/run.jsonl"

fill
port=$((20000 + RANDOM % 20000))
"${as[@]}" "$airlock" proxy -p "$policy" --listen "127.0.0.1:$port" --log "$dir/proxy.jsonl" \
	>/dev/null 2>"$out/proxy.err" &
pid=$!
for _ in $(seq 50); do
	grep -q listening "$out/proxy.err" && break
	sleep 0.1
done
$py "$out/flood.py" proxy-distinct full --via "127.0.0.1:$port" --count 3000 --seconds 10 |
	sed 's/^/proxy flood: /'
kill -TERM "$pid"
for _ in $(seq 100); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
kill -KILL "$pid" 2>/dev/null && echo "proxy ignored SIGTERM"
wait "$pid"
echo "proxy rc=$?"
sed 's/^/proxy err: /' "$out/proxy.err"
cp "$dir/proxy.jsonl" "$out/proxy-full.jsonl"
umount "$dir"
