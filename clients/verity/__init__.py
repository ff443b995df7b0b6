"""Verity off-chain clients: engine, storage, chain access, nodes and CLI."""
__version__ = "0.1.0"
