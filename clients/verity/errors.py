"""One base exception for everything Verity raises on purpose.

Subclasses take the facts as arguments and build their own message, so a
caller never formats error text by hand and a log line always carries the
context (which field, which file, which profile). Other packages add their
own subclasses next to their code: `class ChainError(VerityError): ...`.
"""
from __future__ import annotations


class VerityError(Exception):
    """Base class of every deliberate Verity error."""


class ManifestInvalid(VerityError, ValueError):
    """A job manifest failed the schema or a cross-field rule."""

    def __init__(self, field: str, reason: str):
        self.field, self.reason = field, reason
        super().__init__(f"manifest field {field!r}: {reason}")


class ShardInvalid(VerityError, ValueError):
    """A dataset shard (or an input to `verity data shard`) was rejected."""

    def __init__(self, source: str, reason: str):
        self.source, self.reason = source, reason
        super().__init__(f"shard {source}: {reason}")


class StateInvalid(VerityError, ValueError):
    """A training state, checkpoint or weights file was rejected."""

    def __init__(self, source: str, reason: str):
        self.source, self.reason = source, reason
        super().__init__(f"state {source}: {reason}")


class ProfileUnsupported(VerityError, RuntimeError):
    """This process cannot honour the job's determinism profile."""

    def __init__(self, profile: str, reason: str):
        self.profile, self.reason = profile, reason
        super().__init__(f"determinism profile {profile!r} unsupported here: {reason}")


class CapacityExceeded(VerityError, RuntimeError):
    """This node cannot do a task in the memory it has or the window the job gives (not the poster's fault)."""

    def __init__(self, what: str, reason: str, note: str = ""):
        self.what, self.reason = what, reason
        self.note = note or "cannot do the work"  # the decline's on-chain note: `time 181/116 s`, `memory 9700/4096 MB`
        super().__init__(f"{what}: {reason}")


class HashMismatch(VerityError, ValueError):
    """Bytes did not hash to the value a trace, manifest or chain promised."""

    def __init__(self, what: str, expected: bytes, actual: bytes):
        self.what, self.expected, self.actual = what, expected, actual
        super().__init__(f"{what}: expected hash 0x{expected.hex()}, got 0x{actual.hex()}")


class WorkdirConflict(VerityError, RuntimeError):
    """A task work directory holds files of a different task or input."""

    def __init__(self, workdir: str, reason: str):
        self.workdir, self.reason = workdir, reason
        super().__init__(f"work dir {workdir}: {reason}")
