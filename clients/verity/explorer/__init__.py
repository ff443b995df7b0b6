"""`verity explorer`: a local web app over the chain and IPFS — the network, each job (live task table, curves,
dispute trails, payments, conservation), each node (earnings, reputation, disputes, tasks) and each final model
(card, hashes, download, `verity verify`). Server-rendered (Jinja2 on starlette + uvicorn), live through
server-sent events (docs/explorer.md). `verity.explorer.app.Explorer` builds the app; importing this package
loads no web framework (the CLI imports it on every command)."""

DEFAULT_PORT = 8600
