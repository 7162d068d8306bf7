"""SOCKS5 probes of airlock proxy's explicit listener (test_gateway_e2e.sh).

Usage: socks_client.py HOST PORT ORIGIN_V4. Prints one marker per probe
that behaved as RFC 1928 and docs/proxy.md say; every socket has a timeout.
"""
import socket
import struct
import sys

HOST, PORT, ORIGIN = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def recv_n(s, n):
    b = b""
    while len(b) < n:
        got = s.recv(n - len(b))
        if not got:
            break
        b += got
    return b


def session(methods=b"\x00"):
    s = socket.create_connection((HOST, PORT), timeout=5)
    s.sendall(b"\x05" + bytes([len(methods)]) + methods)
    return s, recv_n(s, 2)


def request(s, cmd, atyp, addr, port):
    s.sendall(b"\x05" + bytes([cmd, 0, atyp]) + addr + struct.pack(">H", port))
    head = recv_n(s, 4)
    if len(head) < 4:
        return None
    rest = {1: 4, 4: 16}.get(head[3], 0) + 2
    recv_n(s, rest)
    return head[1]


def name(n):
    return bytes([len(n)]) + n.encode()


def mark(ok, what):
    print(what if ok else what + "-FAILED", flush=True)


# CONNECT by name, allowed: the tunnel carries bytes.
s, m = session()
rep = request(s, 1, 3, name("pypi.org"), 7)
ok = m == b"\x05\x00" and rep == 0
if ok:
    s.sendall(b"hello\n")
    ok = recv_n(s, 6) == b"hello\n"
mark(ok, "socks-name-allowed")
s.close()

# CONNECT by name, no rule: "not allowed by ruleset".
s, m = session()
mark(request(s, 1, 3, name("evil.test"), 443) == 2, "socks-name-denied")
s.close()

# CONNECT by address, as an HTTP CONNECT to an address: no cidr rule.
s, m = session()
mark(request(s, 1, 1, socket.inet_aton(ORIGIN), 7) == 2, "socks-addr-denied")
s.close()

# BIND and UDP ASSOCIATE: "command not supported".
for cmd, what in ((2, "socks-bind-refused"), (3, "socks-udp-refused")):
    s, m = session()
    mark(request(s, cmd, 3, name("pypi.org"), 7) == 7, what)
    s.close()

# RFC 1929: a user name (and a password never logged), then CONNECT.
s, m = session(b"\x02")
ok = m == b"\x05\x02"
if ok:
    s.sendall(b"\x01" + name("alice") + name("s3cret-pw"))
    ok = recv_n(s, 2) == b"\x01\x00" and request(s, 1, 3, name("pypi.org"), 7) == 0
mark(ok, "socks-userpass")
s.close()

# No acceptable method (GSSAPI only): 0xff, closed.
s, m = session(b"\x01")
mark(m == b"\x05\xff" and s.recv(10) == b"", "socks-no-method")
s.close()

# A silent client after its greeting: closed by the header timeout.
s, m = session()
s.settimeout(15)
try:
    gone = m == b"\x05\x00" and s.recv(10) == b""
except OSError:
    gone = False
mark(gone, "socks-silent-closed")
s.close()
