#!/usr/bin/env python3
"""Inside the sandbox: send netlink messages to ports of other sockets in
the sandbox's network namespace, as a capability-less process may not
(the kernel refuses it unicast to user ports) but the supervisor may.

  nlforge.py PIDFILE   wait for PIDFILE (the supervisor's pid, which is the
                       port id of the NFLOG socket it bound), then send that
                       port a forged NFLOG packet for 198.51.100.77:7777, and
                       port 1 a message; then a UDP datagram to 127.0.0.1:9
                       with SO_MARK, which needs CAP_NET_ADMIN. Prints
                       "nflog ERRNO port1 ERRNO mark ERRNO" (0: sent)."""
import os, socket, struct, sys, time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_ULOG = 4
NFULNL_MSG_PACKET = 0
NFULA_PACKET_HDR, NFULA_IFINDEX_OUTDEV, NFULA_PAYLOAD, NFULA_PREFIX = 1, 5, 9, 10


def attr(kind, data):
    a = struct.pack("=HH", 4 + len(data), kind) + data
    return a + b"\0" * (-len(a) % 4)


def forged_packet():
    ip = bytearray(28)
    ip[0], ip[3], ip[8], ip[9] = 0x45, 28, 64, socket.IPPROTO_UDP
    ip[12:16] = socket.inet_aton("198.18.0.1")
    ip[16:20] = socket.inet_aton("198.51.100.77")
    ip[22:24] = struct.pack("!H", 7777)
    body = struct.pack("=BBH", socket.AF_INET, 0, socket.htons(7))
    body += attr(NFULA_PACKET_HDR, struct.pack("!HBB", 0x0800, 3, 0))
    body += attr(NFULA_IFINDEX_OUTDEV, struct.pack("!I", 1))
    body += attr(NFULA_PREFIX, b"\0")
    body += attr(NFULA_PAYLOAD, bytes(ip))
    hdr = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET, 0, 1, 0)
    return hdr + body


def send(port, msg):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    try:
        s.sendto(msg, (port, 0))
        return 0
    except OSError as e:
        return e.errno
    finally:
        s.close()


def send_marked():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SO_MARK, struct.pack("=I", 7))], 0,
                  ("127.0.0.1", 9))
        return 0
    except OSError as e:
        return e.errno
    finally:
        s.close()


deadline = time.time() + 10
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.02)
port = int(open(sys.argv[1]).read())
print("nflog", send(port, forged_packet()), "port1", send(1, forged_packet()), "mark",
      send_marked(), flush=True)
time.sleep(0.3)
