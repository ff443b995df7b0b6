"""`verity explorer`: serve the explorer (clients/verity/explorer) for the chain and IPFS node the settings name."""
from __future__ import annotations

from typing import Annotated

import typer

from verity.explorer import DEFAULT_PORT


def _server(chain, storage, host: str, port: int, state_dir, names, on_ready):
    """A uvicorn server for the explorer app that calls `on_ready(url)` once it listens (port 0: the one it got)."""
    import uvicorn

    from verity.explorer.app import Explorer

    app = Explorer(chain, storage, names=names, state_dir=state_dir).app()
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off",
                                           timeout_graceful_shutdown=1))
    original = server.startup

    async def startup(sockets=None):
        await original(sockets)
        if server.servers:
            on_ready(f"http://{host}:{server.servers[0].sockets[0].getsockname()[1]}/")
    server.startup = startup
    return server


def serve(chain, storage, host: str, port: int, state_dir=None, names: dict | None = None, on_ready=None) -> None:
    """Run the explorer until Ctrl-C; `on_ready(url)` once it listens."""
    _server(chain, storage, host, port, state_dir, names, on_ready or (lambda url: None)).run()


def start_background(chain, storage, host: str = "127.0.0.1", port: int = DEFAULT_PORT, state_dir=None,
                     names: dict | None = None, timeout: float = 20.0, say=None):
    """Serve the explorer from a daemon thread (the demo's); (url, stop). `port` taken: any free port instead, and
    `say(line)` says so ("port 8600 busy: explorer on 8601")."""
    import socket
    import threading
    from urllib.parse import urlsplit

    wanted = port
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            port = 0
    ready, box = threading.Event(), {}

    def on_ready(url: str) -> None:
        box["url"] = url
        ready.set()

    server = _server(chain, storage, host, port, state_dir, names, on_ready)
    thread = threading.Thread(target=server.run, name="explorer", daemon=True)
    thread.start()
    if not ready.wait(timeout):
        server.should_exit = True
        raise RuntimeError(f"the explorer did not start listening on {host}:{port} within {timeout:.0f} s")
    if wanted and port == 0 and say is not None:
        say(f"port {wanted} busy: explorer on {urlsplit(box['url']).port}")

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=5)
    return box["url"], stop


def explorer(host: Annotated[str, typer.Option(help="address to listen on (127.0.0.1: this machine only)")] = "127.0.0.1",
             port: Annotated[int, typer.Option(help="port to listen on (0: any free port)")] = DEFAULT_PORT) -> None:
    """Serve a web explorer of the network, its jobs, nodes and models, live (server-sent events)."""
    from verity.chain.client import connect_chain
    from verity.cli.common import console, fail, settings
    from verity.errors import VerityError
    from verity.storage import Storage

    s = settings()
    try:
        chain = connect_chain(s.rpc_url)
        storage = Storage.from_settings(s)
    except VerityError as exc:
        fail(exc)
    serve(chain, storage, host, port, state_dir=s.state_dir,
          on_ready=lambda url: console.print(f"explorer: {url} (chain {s.rpc_url}; Ctrl-C to stop)", highlight=False))
