"""Run one digits-MLP task in a fresh process and print its trace as JSON.

    python _task.py WORKDIR [--kill-at J]   # SIGKILL itself once checkpoint J is on disk
"""
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from engine_builders import build_manifest, digits_shards  # noqa: E402

from verity.engine import TaskRef, initial_state, load_shard, run_task  # noqa: E402


def main() -> None:
    workdir = Path(sys.argv[1])
    kill_at = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--kill-at" else None
    m = build_manifest("mlp", steps_per_round=60, checkpoint_interval=10)
    shard = load_shard(digits_shards()["shard-001"], m.data, samples=539)

    def on_checkpoint(c):
        print(json.dumps({"checkpoint": c.index, "resumed": c.resumed}), flush=True)
        if c.index == kill_at and not c.resumed:
            os.kill(os.getpid(), signal.SIGKILL)

    r = run_task(m, initial_state(m), shard, TaskRef(9, 0, 1), workdir, on_checkpoint=on_checkpoint)
    print(json.dumps({"trace": [h.hex() for h in r.trace], "root": r.root.hex()}), flush=True)


if __name__ == "__main__":
    main()
