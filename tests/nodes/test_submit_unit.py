"""Unit tests of job preparation and the submit options (storage faked: CIDs computed locally)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import typer
from eth_utils import keccak

from verity.chain.protocol import POSTER_BOND
from verity.cid import cid_to_digest
from verity.engine import datasets
from verity.engine.checkpoint import initial_state
from verity.engine.manifest import load_manifest
from verity.storage import cid_of_bytes
from verity.submit.prepare import BadJobSpec, JobSpec, check_funds, plan_job, prepare_job, upload_job
from verity.submit import options as opts

REPO = Path(__file__).resolve().parents[2]


def _storage():
    s = mock.Mock()
    s.put_bytes.side_effect = cid_of_bytes
    return s


def _npz(path: Path, labels) -> str:
    labels = np.asarray(labels)
    np.savez(path, x=np.random.default_rng(0).random((len(labels), 5), dtype=np.float32), y=labels)
    return str(path)


def test_prepared_digits_job_has_a_valid_manifest_and_matching_post_params():
    storage = _storage()
    p = prepare_job(JobSpec(shards=3, rounds=2, steps=20, k=10), storage)
    m = load_manifest(p.manifest_bytes)
    assert len(m.shards) == 3 and sum(s.samples for s in m.shards) + m.eval_shard.samples == 1797
    assert m.data.x_shape == [64] and m.model.config.out_features == 10
    uploaded = [c.args[0] for c in storage.put_bytes.call_args_list]
    assert cid_of_bytes(uploaded[-1]) == p.manifest_cid and uploaded[-1] == p.manifest_bytes
    params = p.post_params()
    assert params[0] == cid_to_digest(p.manifest_cid) and params[1] == keccak(p.manifest_bytes)
    assert params[2] == initial_state(m).hash
    assert params[3:7] == (3, 2, 20, 10)
    assert p.escrow() == 10**18 * 2 * (3 + 1) * 2 + POSTER_BOND  # every replica of every task, and the bond
    assert json.loads(p.manifest_bytes)["shards"][0]["cid"] == cid_of_bytes(uploaded[0])


def test_plan_job_uploads_nothing_and_upload_checks_every_cid_succeeds():
    p = plan_job(JobSpec(shards=2, rounds=1, steps=10, k=10))
    assert [cid_of_bytes(b) for b in p.blobs] == [*p.shard_cids, p.eval_cid, p.manifest_cid]
    liar = mock.Mock()
    liar.put_bytes.return_value = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
    with pytest.raises(Exception, match="computed locally"):
        upload_job(p, liar)


BAD = [
    (dict(shards=0), "--shards"),
    (dict(shards=-3), "--shards"),
    (dict(shards=33), "--shards"),
    (dict(payment=-1.0), "--payment"),
    (dict(payment=0.0), "--payment"),
    (dict(stake=-5.0), "--stake"),
    (dict(replication=3), "--replication"),
    (dict(model="rnn"), "--model"),
    (dict(model="gpt"), "--model"),                                                # digits are not text
    (dict(model_config={"in_features": 3, "hidden": [4], "out_features": 10}), "--model-config"),
    (dict(model_config={"in_features": 64, "hidden": [4], "out_features": 5}), "--model-config"),  # 10 labels
    (dict(dataset="/nonexistent.npz"), "--dataset"),
    (dict(steps=25), "-k/--checkpoint-interval"),
    (dict(trim=0.1), "--trim"),
    (dict(lr=0.0), "--lr"),
    (dict(replication=1, challenge_window=-1), "--challenge-window"),
]


@pytest.mark.parametrize("spec, flag", BAD, ids=[f"{f}-{list(s.values())[0]}" for s, f in BAD])
def test_bad_job_spec_names_the_option_and_uploads_nothing_fails(spec, flag):
    storage = _storage()
    with pytest.raises(BadJobSpec) as err:
        prepare_job(JobSpec(**spec), storage)
    assert str(err.value).startswith(f"{flag}: ") and "\n" not in str(err.value)
    assert not storage.put_bytes.called


@pytest.mark.parametrize("labels, why", [([0, 1, 2, -1] * 10, "found -1"), ([0] * 40, "at least 2")])
def test_dataset_with_wrong_labels_fails(tmp_path, labels, why):
    with pytest.raises(BadJobSpec, match=f"^--dataset: .*{why}"):
        plan_job(JobSpec(dataset=_npz(tmp_path / "d.npz", labels), shards=2))


def test_cnn_on_flat_features_fails(tmp_path):
    with pytest.raises(BadJobSpec, match=r"^--model: cnn does not fit"):
        plan_job(JobSpec(model="cnn", dataset=_npz(tmp_path / "d.npz", [0, 1] * 20), shards=2))


@pytest.mark.parametrize("text, why", [("{bad", "not valid JSON"), ("[1, 2]", "JSON object"),
                                       ('{"in_features": 64}', None)])
def test_parse_model_config(text, why):
    if why is None:
        assert opts.parse_model_config(text) == {"in_features": 64}
    else:
        with pytest.raises(BadJobSpec, match=f"^--model-config: .*{why}"):
            opts.parse_model_config(text)


def test_model_config_from_a_json_file_succeeds(tmp_path):
    (tmp_path / "m.json").write_text('{"in_features": 64, "hidden": [8], "out_features": 10}')
    p = plan_job(JobSpec(model_config=opts.parse_model_config(str(tmp_path / "m.json")), shards=2))
    assert p.manifest_doc["model"]["config"]["hidden"] == [8]


def test_check_writable(tmp_path):
    (tmp_path / "file").write_text("x")
    opts.check_writable("out", tmp_path / "new" / "job.json")  # missing folders are fine
    for bad, why in [(tmp_path, "is a directory"), (tmp_path / "file" / "job.json", "not a directory"),
                     (Path("/proc/verity-nope/job.json"), "cannot write")]:
        with pytest.raises(BadJobSpec, match=f"^--out: .*{why}"):
            opts.check_writable("out", bad)


def test_check_funds_names_payment_fails():
    p = plan_job(JobSpec(shards=2, rounds=1, steps=10, k=10))
    check_funds(p.escrow(), p, "0xabc")
    with pytest.raises(BadJobSpec, match=r"^--payment: the escrow is 7 VRT but 0xabc holds 6 VRT "):
        check_funds(6 * 10**18, p, "0xabc")


def _shard_dir(tmp_path: Path, n: int = 3) -> Path:
    x, y = datasets.digits()
    built = datasets.make_shards(x, y, task="classification", n_shards=n, eval_fraction=opts.EVAL_FRACTION, source="digits")
    out = tmp_path / "shards"
    datasets.write_shards(out, built)
    return out


def test_shard_directory_is_submitted_as_written_succeeds(tmp_path):
    out = _shard_dir(tmp_path)
    index = json.loads((out / "index.json").read_text())
    for dataset in (out, out / "index.json"):
        p = plan_job(JobSpec(dataset=str(dataset), shards=None, rounds=1, steps=10, k=10))
        assert p.spec.shards == 3 and p.shard_cids == [e["cid"] for e in index["shards"]]
        assert p.eval_cid == index["eval"]["cid"] and p.manifest_doc["data"] == index["data"]


def test_shard_directory_with_other_shard_count_or_changed_file_fails(tmp_path):
    out = _shard_dir(tmp_path)
    with pytest.raises(BadJobSpec, match=r"^--shards: 4, but .* holds 3 shards"):
        plan_job(JobSpec(dataset=str(out), shards=4))
    data = bytearray((out / "shard-001.safetensors").read_bytes())
    data[-1] ^= 1
    (out / "shard-001.safetensors").write_bytes(bytes(data))
    with pytest.raises(BadJobSpec, match=r"^--dataset: .*shard-001.safetensors does not match the sha256"):
        plan_job(JobSpec(dataset=str(out), shards=None))


def _ape_script():
    spec = importlib.util.spec_from_file_location("submit_script", REPO / "scripts" / "submit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # ape itself is imported only when the command runs
    return module


def _typer_params(fn) -> dict:
    app = typer.Typer()
    app.command()(fn)
    return {p.name: p for p in typer.main.get_command(app).params}


def test_ape_and_verity_submit_share_options_defaults_and_help_succeeds():
    from verity.cli.job_submit import submit

    ape = {p.name: p for p in _ape_script().cli.params}
    verity = _typer_params(submit)
    shared = set(ape) & set(verity)
    assert set(opts.HELP) - {"eval_fraction", "block"} <= shared | {"name"}
    for name in shared:
        assert ape[name].default == verity[name].default, name
        assert ape[name].opts == verity[name].opts or name == "account", name
    for params in (ape, verity):
        assert all(p.help for p in params.values()), [n for n, p in params.items() if not p.help]


def test_data_shard_defaults_are_the_submit_defaults_succeeds():
    from verity.cli.data import schema, shard

    params = _typer_params(shard)
    assert params["source"].default == opts.DATASET == JobSpec().dataset
    assert params["shards"].default == opts.SHARDS == JobSpec().shards
    assert params["eval_fraction"].default == opts.EVAL_FRACTION == JobSpec().eval_fraction
    assert params["block"].default == opts.BLOCK == JobSpec().block and params["seed"].default == JobSpec().seed
    for fn in (shard, schema):
        assert all(p.help for p in _typer_params(fn).values())


@pytest.mark.parametrize("alias, index, flag", [("no-such-alias", 0, "--account"), (None, 99, "--test-account")])
def test_ape_submit_unknown_account_fails(alias, index, flag):
    with pytest.raises(BadJobSpec, match=f"^{flag}: "):
        _ape_script()._sender(alias, index)


@pytest.mark.parametrize("field, value", [("execution_window", 1), ("execution_window", 29), ("reveal_window", 4)])
def test_windows_below_the_contracts_minimum_refused_before_anything_is_spent(field, value):
    with pytest.raises(BadJobSpec, match=f"--{field.replace('_', '-')}: {value} s is below the contract's minimum"):
        opts.validate_spec(JobSpec(shards=2, **{field: value}))


def test_window_minimums_match_the_contract():
    from verity.chain.protocol import MIN_TASK_STAKE

    src = (REPO / "contracts" / "JobRegistryBase.sol").read_text()
    assert f"uint256 internal constant MIN_TASK_STAKE = {MIN_TASK_STAKE // 10**18}e18;" in src
    assert f"uint64 public constant MIN_EXECUTION_WINDOW = {opts.MIN_EXECUTION_WINDOW};" in src
    assert f"uint64 public constant MIN_REVEAL_WINDOW = {opts.MIN_REVEAL_WINDOW};" in src


def test_windows_below_the_chains_minimum_name_the_option_fails():
    """On a 12-second chain (JobRegistry.blockSeconds 12) an execution window under 16 blocks and a challenge window
    under 3 blocks are refused before anything is spent, naming the flag and the chain's minimum; on the devnet the
    same job passes, and a window left at 0 takes the registry's default."""
    from verity.submit.prepare import check_windows

    from dataclasses import replace

    prepared = plan_job(JobSpec(shards=1, rounds=1, steps=10, k=10, execution_window=60, challenge_window=30))
    check_windows(prepared, 1, 120)
    with pytest.raises(BadJobSpec, match=r"--execution-window: 60 s is below this chain.s minimum of 192 s"):
        check_windows(prepared, 12, 192)
    default = replace(prepared, spec=replace(prepared.spec, execution_window=0))
    with pytest.raises(BadJobSpec, match=r"--challenge-window: 30 s is below this chain.s minimum of 36 s"):
        check_windows(default, 12, 192)
    check_windows(replace(default, spec=replace(default.spec, challenge_window=36)), 12, 192)


def test_result_floor_defaults_with_a_verification_pot():
    """Issue 23: a job with a verification pot holds every result for its fee checks: 4 s plus the work (declared, or
    estimated at 10 GFLOP/s), at least 3 blocks, at most half the execution window; none without a pot; an explicit
    floor is kept."""
    from verity.submit.modules import result_floor_for

    pot = dict(shards=1, rounds=1, steps=10, k=10, verification_fee=0.1)
    assert result_floor_for(JobSpec(shards=1, rounds=1, steps=10, k=10)) == 0
    assert result_floor_for(JobSpec(**pot)) == 4
    assert result_floor_for(JobSpec(**pot), block_seconds=12) == 36  # 3 blocks of a 12-s chain
    assert result_floor_for(JobSpec(**pot), step_flops=2 * 10**9) == 6  # 10 steps x 2 GFLOP at 10 GFLOP/s
    declared = JobSpec(**{**pot, "steps": 100}, step_budget_ms=400)  # 40 s of work, a 84-s window
    assert result_floor_for(declared) == 42
    assert result_floor_for(JobSpec(**{**pot, "steps": 100}, step_budget_ms=500)) == 48  # 54 s: half the 97-s window
    assert result_floor_for(JobSpec(**pot, result_floor=0)) == 0
    assert plan_job(JobSpec(**pot)).post_params().resultFloor == 4  # the tiny MLP: no work worth a second


def test_result_floor_above_half_the_window_names_the_option_fails():
    from verity.submit.prepare import check_windows

    with pytest.raises(BadJobSpec, match=r"--result-floor: 31 s is more than half the execution window \(60 s\)"):
        opts.validate_spec(JobSpec(shards=1, execution_window=60, result_floor=31))
    prepared = plan_job(JobSpec(shards=1, rounds=1, steps=10, k=10, result_floor=61))
    with pytest.raises(BadJobSpec, match=r"--result-floor: 61 s is more than half the execution window \(120 s\)"):
        check_windows(prepared, 1, 120)  # the registry's default window
    check_windows(prepared, 1, 122)
