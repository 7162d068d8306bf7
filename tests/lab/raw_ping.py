#!/usr/bin/python3
"""raw_ping.py ADDR: one ICMP (v4) or ICMPv6 echo request over a raw socket
(needs CAP_NET_RAW); prints "reply" or "no-reply: WHY", exit 0 / 1."""
import socket
import struct
import sys


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


addr = sys.argv[1]
v6 = ":" in addr
if v6:
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    pkt = struct.pack("!BBHHH", 128, 0, 0, 0x4242, 1) + b"airlock"  # the kernel sums it
    want = 129
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    body = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1) + b"airlock"
    pkt = body[:2] + struct.pack("!H", csum(body)) + body[4:]
    want = 0
s.settimeout(2)
try:
    s.sendto(pkt, (addr, 0))
    while True:
        data, _ = s.recvfrom(2048)
        icmp = data if v6 else data[(data[0] & 0xF) * 4:]
        if icmp[0] == want and icmp[4:6] == b"\x42\x42":
            print("reply")
            sys.exit(0)
except OSError as e:
    print(f"no-reply: {e}")
    sys.exit(1)
