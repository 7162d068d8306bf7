#!/usr/bin/python3
"""Tunnels that outnumber the proxy's descriptors, for its fd limits.

fdhold.py PROXY_PORT TARGET N IDLE SETTLE_S BYTES -- CMD...

Opens N CONNECT tunnels through the explicit proxy on 127.0.0.1:PROXY_PORT
to TARGET (an echo server) at once, each checked with a line through it;
after SETTLE_S seconds every tunnel has an outcome: "ok", the status line
and Proxy-Status of a refusal, "no reply" (still waiting), or an error.
Then IDLE more connections to the proxy that send nothing take whatever
descriptors the proxy has left. With all of them still open it runs CMD
(its exit status and output are reported), then sends BYTES bytes through
every working tunnel at the same time and expects them echoed back (which
needs a splice pipe, or the proxy's copy, per direction). Prints one JSON
object:
  {"outcomes": {outcome: count}, "cmd_rc": ..., "cmd_out": "...",
   "echoed": working tunnels that echoed BYTES, "echo_failed": [...]}"""
import asyncio
import collections
import json
import resource
import sys


async def open_one(i, port, target, out):
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as e:
        out[i] = (f"connect: {e.strerror}", None)
        return
    try:
        writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode(errors="replace").split("\r\n")
        if not lines[0].startswith("HTTP/1.1 200"):
            ps = [h for h in lines if h.lower().startswith("proxy-status:")]
            out[i] = (f"{lines[0]} | {ps[0] if ps else '-'}", None)
            writer.close()
            return
        line = f"tunnel {i}\n".encode()
        writer.write(line)
        got = await reader.readuntil(b"\n")
        out[i] = ("ok", (reader, writer)) if got == line else (f"echo mismatch {got!r}", None)
    except asyncio.CancelledError:
        out[i] = ("no reply", None)
        writer.close()
    except Exception as e:  # noqa: BLE001 - every failure is reported
        out[i] = (f"{type(e).__name__}", None)
        writer.close()


async def echo(rw, nbytes):
    reader, writer = rw
    data = bytes(range(256)) * (nbytes // 256)
    writer.write(data)
    # Read only later: meanwhile the bytes wait in the proxy, which needs
    # somewhere to keep them for every tunnel at once.
    await asyncio.sleep(1)
    got = 0
    while got < len(data):
        d = await reader.read(65536)
        if not d:
            raise ConnectionError("closed after %d bytes" % got)
        got += len(d)


async def main():
    sep = sys.argv.index("--")
    port, target, n, n_idle, settle, nbytes = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                               int(sys.argv[4]), float(sys.argv[5]),
                                               int(sys.argv[6]))
    cmd = sys.argv[sep + 1:]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    out = [None] * n
    tasks = [asyncio.create_task(open_one(i, port, target, out)) for i in range(n)]
    done, pending = await asyncio.wait(tasks, timeout=settle)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    outcomes = collections.Counter(o[0] if o else "no reply" for o in out)
    idle = []
    for _ in range(n_idle):
        try:
            idle.append(await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2))
        except (OSError, asyncio.TimeoutError):
            break
    await asyncio.sleep(1)
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    try:
        cmd_out, _ = await asyncio.wait_for(proc.communicate(), 20)
        cmd_rc = proc.returncode
    except asyncio.TimeoutError:
        proc.kill()
        cmd_out, cmd_rc = b"(timed out)", -1
    working = [o[1] for o in out if o and o[1] is not None]
    try:
        res = await asyncio.wait_for(asyncio.gather(*(echo(rw, nbytes) for rw in working),
                                                    return_exceptions=True), 60)
        failed = [f"{type(r).__name__}: {r}" for r in res if isinstance(r, BaseException)]
    except asyncio.TimeoutError:
        failed = ["the echo round timed out"] * len(working)
    for rw in working + idle:
        rw[1].close()
    print(json.dumps({"outcomes": outcomes, "idle": len(idle), "cmd_rc": cmd_rc,
                      "cmd_out": cmd_out.decode(errors="replace")[-300:],
                      "echoed": len(working) - len(failed), "echo_failed": failed[:5]}))


asyncio.run(main())
