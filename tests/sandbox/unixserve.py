# Host-side socket servers for tests/sandbox/unix.sh: in each DIR given, a
# stream (stream.sock), a seqpacket (seq.sock) and a datagram (dgram.sock)
# socket, mode 0666 so that only airlock stands between any user and them.
# Every connection accepted and every datagram received appends one line to
# DIR/events, so the test can tell "refused" from "reached". Writes its pid
# to the file given first; serves for at most 120 s.
import os
import select
import socket
import sys
import time

pidfile, dirs = sys.argv[1], sys.argv[2:]
socks = {}
for d in dirs:
    for name, kind in (("stream.sock", socket.SOCK_STREAM), ("seq.sock", socket.SOCK_SEQPACKET),
                       ("dgram.sock", socket.SOCK_DGRAM)):
        path = os.path.join(d, name)
        s = socket.socket(socket.AF_UNIX, kind)
        s.bind(path)
        os.chmod(path, 0o666)
        if kind != socket.SOCK_DGRAM:
            s.listen(16)
        socks[s] = (d, name, kind)
with open(pidfile + ".tmp", "w") as f:
    f.write("%d\n" % os.getpid())
os.rename(pidfile + ".tmp", pidfile)

end = time.monotonic() + 120
while time.monotonic() < end:
    ready, _, _ = select.select(list(socks), [], [], 1)
    for s in ready:
        d, name, kind = socks[s]
        if kind == socket.SOCK_DGRAM:
            s.recv(64)
        else:
            c, _ = s.accept()
            c.close()
        with open(os.path.join(d, "events"), "a") as f:
            f.write(name + "\n")
