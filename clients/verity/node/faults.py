"""TEST-ONLY fault switches, so adversarial behaviour runs through the real node.

    --fault bitflip@step=N      flip one bit of the first parameter right after step N
                                (the node stays self-consistent: it replays the same
                                fault when asked for per-step hashes in a dispute)
    --fault lazy                skip training: claim the input state as every checkpoint
    --fault silent-in-dispute   never answer in a dispute (loses on its clock)
    --fault withhold-checkpoint never upload checkpoints (only their CIDs are claimed; note that a
                                checkpoint identical to an honest node's is still found under its CID)
    --fault corrupt-checkpoint  publish a malformed file (bad header) in place of every TRAIN checkpoint
    --fault sybil-challenge     a verifier that challenges every candidate at once, without re-executing, with a
                                claim built to lose (the candidate's own trace, its last leaf replaced): a cheater's
                                sybil trying to pre-empt honest challenges (P1); combine with silent-in-dispute
                                to throw the dispute on its clock
    --fault decline-invalid     a solver that declines every slot it is drawn for as "invalid inputs" at once, whatever
                                the inputs: a sybil trying to fail an honest job and share its poster bond (issue 23)
    --fault copy-result         a node that never computes: it lists its IPFS node's pins until it finds a result
                                bundle naming its task's job, round and index, and commits that as a replica, or
                                its final as a fee auditor's blind check (issue 23: nothing of a result may be
                                readable before every commitment is final)

Honest nodes run with no faults. Nothing here is reachable without the flag.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import torch

from verity.errors import VerityError

_SPEC = re.compile(r"^(bitflip@step=(?P<step>\d+)|lazy|silent-in-dispute|withhold-checkpoint|corrupt-checkpoint"
                   r"|sybil-challenge|copy-result|decline-invalid)$")


class BadFault(VerityError, ValueError):
    def __init__(self, spec: str):
        super().__init__(f"unknown fault {spec!r}; expected bitflip@step=N, lazy, silent-in-dispute, "
                         "withhold-checkpoint, corrupt-checkpoint, sybil-challenge, copy-result or decline-invalid")


@dataclass
class Faults:
    bitflip_step: int | None = None
    lazy: bool = False
    silent_in_dispute: bool = False
    withhold_checkpoint: bool = False
    corrupt_checkpoint: bool = False
    sybil_challenge: bool = False
    copy_result: bool = False
    decline_invalid: bool = False
    specs: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, specs: list[str] | None) -> "Faults":
        f = cls(specs=list(specs or []))
        for spec in f.specs:
            name = spec.strip()
            m = _SPEC.match(name)
            if not m:
                raise BadFault(spec)
            if m.group("step") is not None:
                f.bitflip_step = int(m.group("step"))
            elif name == "lazy":
                f.lazy = True
            elif name == "silent-in-dispute":
                f.silent_in_dispute = True
            elif name == "corrupt-checkpoint":
                f.corrupt_checkpoint = True
            elif name == "sybil-challenge":
                f.sybil_challenge = True
            elif name == "copy-result":
                f.copy_result = True
            elif name == "decline-invalid":
                f.decline_invalid = True
            else:
                f.withhold_checkpoint = True
        return f

    def __bool__(self) -> bool:
        return bool(self.specs)

    def install(self) -> None:
        """Patch the trainer for this process only (bitflip)."""
        if self.bitflip_step is None:
            return
        from verity.engine import trainer as trainer_mod

        target = self.bitflip_step
        original = trainer_mod.Trainer.train_step
        if getattr(original, "_verity_fault", False):
            return

        def train_step(self):
            loss = original(self)
            if self.step == target:
                with torch.no_grad():
                    p = next(self.model.parameters())
                    flat = p.view(-1).view(torch.int32)
                    flat[0] ^= 1 << 22  # a mantissa bit: small, silent, wrong
            return loss

        train_step._verity_fault = True
        trainer_mod.Trainer.train_step = train_step


def copy_from_pins(ctx, task, item) -> dict | None:
    """TEST-ONLY (--fault copy-result; unreachable without it): a node that never computes. It lists every CID its
    IPFS node pins (on the devnet, one daemon serves every node) and reads each small one it has not read yet, until
    one is a result bundle naming the task's job, round and index and starting from its input hash; that bundle's
    trace, root and CID are what a copying replica commits, and its final what a copying fee auditor commits."""
    seen = item.data.setdefault("seen", [])
    for cid in ctx.storage.pins(timeout=5):
        if cid in seen:
            continue
        seen.append(cid)
        try:
            bundle = ctx.storage.get_json(cid, max_bytes=1 << 20, timeout=2)
        except Exception:  # noqa: BLE001 — a checkpoint, a shard, anything not a small JSON object
            continue
        if isinstance(bundle, dict) and (bundle.get("job"), bundle.get("round"), bundle.get("index")) == \
                (int(task.jobId), int(task.round), int(task.index)):
            from verity.engine import merkle

            trace = [bytes.fromhex(h.removeprefix("0x")) for h in bundle["trace"]]
            if not trace or trace[0] != bytes(task.inputHash):
                continue  # another deployment's task with the same ids (a restarted devnet keeps its pins)
            logging.getLogger("verity.node.faults").warning(
                "TEST-ONLY copy-result: task %d: copying bundle %s found among the pins", item.task_id, cid)
            return {"trace": bundle["trace"], "root": "0x" + merkle.root(trace).hex(), "cid": cid}
    return None
