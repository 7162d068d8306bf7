#!/usr/bin/python3
"""Refused whole: busy_client.py PROXY_PORT N.

Holds the explicit proxy's one connection slot (started with --max-conns 1)
with half a request head, then opens N more connections, each sending a
whole request at once, so that it is already waiting when the proxy
refuses. Each must read the complete 503 (its Content-Length honoured) and
then a clean end, not a reset. Prints {"n": N, "whole": ..., "first": [...]};
exits 1 unless all N were whole."""
import json
import socket
import sys
import time


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    hold = socket.create_connection(("127.0.0.1", port))
    hold.sendall(b"GET http://127.0.0.1:1/ HTTP/1.1\r\nX: ")
    time.sleep(0.2)
    whole, first = 0, []
    req = (b"GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-Pad: " + b"a" * 2000 +
           b"\r\n\r\n")
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(10)
        s.sendall(req)
        time.sleep(0.01)
        data, err = b"", None
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        except OSError as e:
            err = str(e)
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:")]
        if head.startswith(b"HTTP/1.1 503") and length == [len(body)] and err is None:
            whole += 1
        elif len(first) < 3:
            first.append(f"{data[-60:]!r} error {err}")
    hold.close()
    print(json.dumps({"n": n, "whole": whole, "first": first}))
    sys.exit(0 if whole == n else 1)


main()
