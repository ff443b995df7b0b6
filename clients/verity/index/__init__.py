"""A local index of the deployment's events in SQLite, so `job show/watch` and `node status` read a job's or an
address's events by lookup instead of rescanning the chain (docs/indexer.md).

    with open_index(chain) as ix:
        ix.sync()
        events = ix.live_events(job_id=3)
"""
from verity.index.api import Index, open_index, open_source
from verity.index.store import IndexOfAnotherChain, IndexTooNew

__all__ = ["Index", "open_index", "open_source", "IndexOfAnotherChain", "IndexTooNew"]
