#!/usr/bin/python3
"""A TCP echo server for the proxy's end-to-end tests: echo.py ADDR PORT.
Writes "ready" to stdout once listening; serves until killed."""
import asyncio
import resource
import sys


async def echo(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    server = await asyncio.start_server(echo, sys.argv[1], int(sys.argv[2]), backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
