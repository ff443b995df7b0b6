"""Issue 24, data people have, through real nodes: a tabular job from a CSV (features and label by column name) and a
ResNet job (GroupNorm, portable-f32) on a folder of PNG images (one sub-directory per class, decoded and resized on the submitter's machine),
posted with `verity job submit` the way a user would, both trained, verified and paid."""
from __future__ import annotations

import csv
import subprocess
import sys

import pytest
import torch

from verity.job.view import JobReader

from node_builders import conserved

pytestmark = pytest.mark.integration


def _csv(path, n=400):
    g = torch.Generator().manual_seed(0)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["height", "width", "noise", "kind"])
        for _ in range(n):
            k = int(torch.randint(3, (1,), generator=g))
            h, wd, z = (float(v) for v in torch.rand(3, generator=g))
            w.writerow([round(h + 2 * k, 4), round(wd - k, 4), round(z, 4), ["ash", "birch", "cedar"][k]])


def _images(root, n=40):
    from PIL import Image

    g = torch.Generator().manual_seed(1)
    for c, name in enumerate(("dark", "light")):
        (root / name).mkdir(parents=True)
        for i in range(n):
            level = int(60 + 120 * c + int(torch.randint(40, (1,), generator=g)))
            Image.new("L", (20, 20), level).save(root / name / f"{i:03d}.png")


def _submit(net, *args) -> int:
    proc = subprocess.run([sys.executable, "-m", "verity", "job", "submit", *args, "--shards", "2", "--rounds", "1",
                           "--steps", "20", "-k", "10", "--account", "9", "--yes"], env=net.env, cwd=net.root,
                          text=True, timeout=300, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return int(proc.stdout.split("posted job ", 1)[1].split(":")[0])


def test_csv_table_and_image_folder_resnet_jobs_train_through_real_nodes_succeeds(net):
    for i in (1, 2, 3):
        net.start_node(f"solver-{i}", i)
    net.wait_registered(3)
    _csv(net.root / "trees.csv")
    _images(net.root / "photos")
    # one after the other: the test's window skipper warps the chain clock for one job's windows, and with two jobs
    # in flight it once warped past the other job's reveal deadline (both replicas late; a test artefact)
    table = _submit(net, "--dataset", str(net.root / "trees.csv"), "--features", "height,width", "--label", "kind")
    net.wait_job(table, timeout=300)
    images = _submit(net, "--model", "resnet", "--dataset", str(net.root / "photos"), "--image-size", "8")
    net.wait_job(images, timeout=300)
    c = net.client()
    tab = JobReader(c, net.storage(), table)
    assert tab.manifest.data.x_shape == [2] and tab.manifest.data.num_classes == 3
    assert tab.metric(0).accuracy > 0.5, tab.metric(0)  # 3 classes: chance is 1/3
    img = JobReader(c, net.storage(), images)
    assert img.manifest.data.x_shape == [1, 8, 8] and img.manifest.model.arch == "resnet"
    assert img.metric(0) is not None
    assert not [e for e in net.events() if e.name in ("ReplicaDeclined", "DisputeOpened")]
    total, minted, burned = conserved(c)
    assert total == minted - burned
