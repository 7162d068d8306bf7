#!/usr/bin/python3
"""N concurrent CONNECT tunnels through an explicit proxy, all open at once.

tunnels.py PROXY_HOST PROXY_PORT TARGET_HOST:PORT N TIMEOUT_S

Each client sends CONNECT, expects 200, sends a unique line through the
tunnel to an echo server and expects it back; every tunnel stays open until
all N have echoed, so the proxy really holds N at once. Prints
"ok N" or the failures, exits 0 only if all N worked within TIMEOUT_S."""
import asyncio
import resource
import sys


async def one(i, host, port, target, all_open, results):
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            results[i] = "status " + head.split(b"\r\n")[0].decode(errors="replace")
            writer.close()
            return
        line = f"tunnel {i}\n".encode()
        writer.write(line)
        got = await reader.readuntil(b"\n")
        if got != line:
            results[i] = f"echo mismatch {got!r}"
        else:
            results[i] = "ok"
        await all_open.wait()
        writer.close()
    except Exception as e:  # noqa: BLE001 - every failure is reported
        results[i] = f"{type(e).__name__}: {e}"


async def main():
    host, port, target, n, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results = [None] * n
    all_open = asyncio.Event()
    tasks = [asyncio.create_task(one(i, host, port, target, all_open, results)) for i in range(n)]

    async def watch():
        while sum(1 for r in results if r is not None) < n:
            await asyncio.sleep(0.05)
        all_open.set()

    try:
        await asyncio.wait_for(asyncio.gather(watch(), *tasks), timeout)
    except asyncio.TimeoutError:
        pass
    bad = [(i, r) for i, r in enumerate(results) if r != "ok"]
    if bad:
        print(f"failed {len(bad)} of {n}: {bad[:5]}")
        sys.exit(1)
    print(f"ok {n}")


asyncio.run(main())
