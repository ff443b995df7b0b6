"""Verity off-chain clients: engine, storage, chain access, nodes and CLI."""
__version__ = "0.1.0"

import warnings as _warnings

# ipfshttpclient 0.7 passes urllib3 a parameter urllib3 2 deprecates; harmless, and noisy in every command.
_warnings.filterwarnings("ignore", message="The 'strict' parameter is no longer needed", category=FutureWarning)
