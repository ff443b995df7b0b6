"""A delaying TCP proxy: the lab's latency, since this kernel has no netem.

Each byte read from one side is written to the other `delay` seconds after it arrived, in both directions, without
holding up the bytes behind it (a queue per direction, stamped on arrival), so a link keeps its bandwidth and gains
`delay` of one-way latency (a round trip through it: 2 × delay). One process can serve several mappings:

    python -m verity.lab.proxy --delay-ms 40 10.77.3.2:14001=10.77.3.2:4001 0.0.0.0:18545=127.0.0.1:8545
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from dataclasses import dataclass

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Mapping:
    listen_host: str
    listen_port: int
    target_host: str
    target_port: int

    @classmethod
    def parse(cls, text: str) -> Mapping:
        """`LISTEN_HOST:PORT=TARGET_HOST:PORT`."""
        try:
            listen, target = text.split("=")
            lh, lp = listen.rsplit(":", 1)
            th, tp = target.rsplit(":", 1)
            return cls(lh, int(lp), th, int(tp))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not LISTEN_HOST:PORT=TARGET_HOST:PORT") from None

    def __str__(self) -> str:
        return f"{self.listen_host}:{self.listen_port}={self.target_host}:{self.target_port}"


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy reader → writer, each chunk released `delay` s after it was read."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def read() -> None:
        try:
            while data := await reader.read(CHUNK):
                queue.put_nowait((time.monotonic() + delay, data))
        except (ConnectionError, OSError):
            pass
        queue.put_nowait((time.monotonic() + delay, b""))

    reading = asyncio.create_task(read())
    try:
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass
    finally:
        reading.cancel()


async def _serve_one(mapping: Mapping, delay: float, client_r, client_w) -> None:
    try:
        target_r, target_w = await asyncio.open_connection(mapping.target_host, mapping.target_port)
    except OSError:
        client_w.close()
        return
    try:
        await asyncio.gather(_pump(client_r, target_w, delay), _pump(target_r, client_w, delay))
    finally:
        for w in (client_w, target_w):
            w.close()
            with contextlib.suppress(Exception):
                await w.wait_closed()


async def start(mappings: list[Mapping], delay: float) -> list[asyncio.AbstractServer]:
    """Listen on every mapping (in the running loop); returns the servers (close them to stop)."""
    servers = []
    for m in mappings:
        servers.append(await asyncio.start_server(
            lambda r, w, m=m: _serve_one(m, delay, r, w), m.listen_host, m.listen_port, reuse_address=True))
    return servers


async def _main(mappings: list[Mapping], delay: float) -> None:
    servers = await start(mappings, delay)
    print(f"proxy up: delay {delay * 1000:g} ms; " + ", ".join(map(str, mappings)), flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m verity.lab.proxy", description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, required=True, help="one-way delay added in each direction")
    parser.add_argument("mappings", nargs="+", type=Mapping.parse, metavar="LISTEN=TARGET")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.mappings, args.delay_ms / 1000))


if __name__ == "__main__":
    main()
