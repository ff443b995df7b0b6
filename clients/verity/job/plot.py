"""The loss plot of `verity job show/watch --plot`: the global model's held-out loss after each
round, and each shard replica's loss at its checkpoints within the round.

x is the round axis as the tables number it: the global model of round r sits at x = r, training
of round r runs from x = r − 1 to r, a checkpoint after step s at r − 1 + s / steps_per_round."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from verity.chain.views import read
from verity.cid import digest_to_cid
from verity.errors import VerityError

MAX_POINTS_PER_TASK = 8


@dataclass(frozen=True)
class CheckpointLoss:
    round: int       # 0-based, as in JobReport
    index: int       # shard
    fraction: float  # step / steps_per_round
    loss: float


def _picks(n: int, most: int) -> list[int]:
    """Checkpoint 0 (the round's input, so each round's curve starts at the previous global model)
    and up to `most` of 1..n, evenly spread, n always."""
    return [0, *sorted({max(1, round(i * n / most)) for i in range(1, most + 1)} if n > most else range(1, n + 1))]


def checkpoint_losses(reader, rep, most: int = MAX_POINTS_PER_TASK) -> list[CheckpointLoss]:
    """Held-out loss of the checkpoints of every accepted TRAIN task (each verified against its
    bundle's trace, whose last hash must be the task's on-chain final hash)."""
    from verity.engine.checkpoint import checkpoint_cap, load_checkpoint
    from verity.engine.evaluate import evaluate

    shard = reader.eval_shard()
    if shard is None:
        return []
    c, m, out = reader.chain, reader.manifest, []
    for row in rep.tasks:
        if row.kind != "train" or row.status != "accepted":
            continue
        t = read(c, c.jobs, "getTask", row.task_id)
        try:
            bundle = reader.storage.get_json(digest_to_cid(t.resultCid))
            trace = [bytes.fromhex(h[2:]) for h in bundle["trace"]]
            if trace[-1] != bytes(t.finalHash):
                continue
            n = len(trace) - 1
            for j in _picks(n, most):
                data = reader.storage.get_bytes(bundle["checkpoints"][str(j)], max_bytes=checkpoint_cap(m))
                state = load_checkpoint(data, m, expected_hash=trace[j], source=f"task {row.task_id} checkpoint {j}")
                out.append(CheckpointLoss(row.round, row.index, j / n, float(evaluate(m, state, shard).loss)))
        except (VerityError, KeyError, TypeError, ValueError):
            continue  # a bundle nobody serves or a malformed one: plot what we have
    return out


def figure(rep, checkpoints: list[CheckpointLoss] = ()):
    """(matplotlib figure, one-line summary); a chart with nothing to show says "no data yet"."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.set_title(f"Verity job {rep.job_id} ({rep.status})")
    xs = [mt.round + 1 for mt in rep.metrics]
    losses = [mt.loss for mt in rep.metrics] + [p.loss for p in checkpoints]
    if not losses:
        ax.text(0.5, 0.5, "no data yet", ha="center", va="center", fontsize=16, color="grey", transform=ax.transAxes)
        ax.set_axis_off()
        what = "no data yet"
    else:
        cmap = plt.get_cmap("tab10")
        for idx in sorted({p.index for p in checkpoints}):
            for rnd in sorted({p.round for p in checkpoints if p.index == idx}):
                pts = sorted((p.round + p.fraction, p.loss) for p in checkpoints if p.index == idx and p.round == rnd)
                ax.plot(*zip(*pts), color=cmap(idx % 10), lw=1, alpha=0.7, marker=".", ms=3,
                        label=f"shard {idx + 1} checkpoints" if rnd == min(p.round for p in checkpoints if p.index == idx) else None)
        if xs:
            ax.plot(xs, [mt.loss for mt in rep.metrics], color="black", lw=2, marker="o", label="global model")
        ax.set_xlim(-0.1, rep.rounds + 0.1)
        ax.set_xticks(range(0, rep.rounds + 1))
        ax.set_xlabel("round")
        ax.set_ylabel("held-out loss")
        top, low = max(losses), min(losses)
        if low > 0 and top / low > 30:
            ax.set_yscale("log")
        else:
            ax.set_ylim(0, top * 1.08 or 1.0)
        accs = [(x, mt.accuracy) for x, mt in zip(xs, rep.metrics) if mt.accuracy is not None]
        if accs:
            ax2 = ax.twinx()
            ax2.plot(*zip(*accs), color="tab:green", ls="--", marker="s", label="accuracy")
            ax2.set_ylim(0, 1.0)
            ax2.set_ylabel("accuracy")
        handles = [h for a in fig.axes for h in a.get_legend_handles_labels()[0]]
        ax.legend(handles, [h.get_label() for h in handles], loc="lower left", fontsize=7, frameon=False)
        what = f"{len(rep.metrics)} round(s), {len(checkpoints)} checkpoint(s)"
    fig.tight_layout()
    return fig, what


def plot(rep, out: Path, checkpoints: list[CheckpointLoss] = ()) -> str:
    """Write the PNG; returns what it shows."""
    import matplotlib.pyplot as plt

    fig, what = figure(rep, checkpoints)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return what
