#!/usr/bin/python3
"""DNS-over-TCP clients that trickle, and one that asks properly.

trickle.py ADDR PORT NAME N RUN_S

Opens N TCP connections to the DNS listener at ADDR:PORT; each sends a
query for NAME one byte every 2 s (its length prefix first), so none ever
completes a message within RUN_S. Meanwhile, at 1 s, 6 s and 13 s, a
normal client opens its own connection and asks for NAME (3 s to answer).
Prints one JSON object:
  {"normal": ["ok" | why, ...], "trickle_closed": how many tricklers the
   server closed, "trickle_open": how many it left open at the end,
   "closed_after_s": the longest a trickler lived before being closed}"""
import json
import select
import socket
import struct
import sys
import time


def query(name, qid):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack(">HH", 1, 1)
    return struct.pack(">H", len(q)) + q


def normal(addr, port, name):
    try:
        s = socket.create_connection((addr, port), timeout=3)
        s.sendall(query(name, 4242))
        data = b""
        while len(data) < 2 or len(data) < 2 + struct.unpack(">H", data[:2])[0]:
            d = s.recv(65536)
            if not d:
                return "closed by the server (%d bytes)" % len(data)
            data += d
        s.close()
        if struct.unpack(">H", data[2:4])[0] != 4242 or data[5] & 0x0F != 0:
            return "bad answer"
        return "ok"
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def main():
    addr, port, name, n, run_s = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    t0 = time.monotonic()
    msg = query(name, 1)
    tr = []  # [socket, bytes sent, connected at, closed at]
    for _ in range(n):
        s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
        s.settimeout(2)
        try:
            s.connect((addr, port))
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        tr.append([s, 0, time.monotonic(), None])
    normals = []
    due = [1.0, 6.0, 13.0]
    next_byte = t0
    while time.monotonic() - t0 < run_s:
        now = time.monotonic()
        if due and now - t0 >= due[0]:
            due.pop(0)
            normals.append(normal(addr, port, name))
            continue
        if now >= next_byte:
            next_byte = now + 2
            for t in tr:
                if t[3] is None and t[1] < len(msg) - 1:
                    try:
                        t[0].send(msg[t[1]:t[1] + 1])
                        t[1] += 1
                    except OSError:
                        t[3] = time.monotonic()
        live = [t for t in tr if t[3] is None]
        r, _, _ = select.select([t[0] for t in live], [], [], 0.1)
        for t in live:
            if t[0] in r:
                try:
                    d = t[0].recv(4096)
                except OSError:
                    d = b""
                if not d:
                    t[3] = time.monotonic()
    closed = [t for t in tr if t[3] is not None]
    print(json.dumps({"normal": normals, "trickle_closed": len(closed),
                      "trickle_open": len(tr) - len(closed),
                      "closed_after_s": round(max((t[3] - t[2] for t in closed), default=0), 1)}))


main()
