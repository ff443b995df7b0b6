import pytest
import torch

from verity.engine import determinism
from verity.engine.determinism import apply_profile, check_environment, deterministic
from verity.errors import ProfileUnsupported


def test_check_environment_cpu_profile_succeeds():
    p = check_environment("cpu-f32-strict")
    assert p.device == "cpu" and p.torch_version == torch.__version__.split("+")[0]


def test_check_environment_unknown_profile_refused():
    with pytest.raises(ProfileUnsupported, match="unknown profile"):
        check_environment("gpu-fast")


def test_check_environment_torch_version_mismatch_refused(monkeypatch):
    monkeypatch.setattr(determinism.torch, "__version__", "2.12.1+cpu")
    with pytest.raises(ProfileUnsupported, match="needs torch 2.13.0"):
        check_environment("cpu-f32-strict")


def test_check_environment_cuda_without_device_refused(monkeypatch):
    monkeypatch.setattr(determinism.torch.cuda, "is_available", lambda: False)
    with pytest.raises(ProfileUnsupported, match="no CUDA device"):
        check_environment("cuda-f32-strict")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_apply_profile_cuda_on_cpu_machine_refused():
    with pytest.raises(ProfileUnsupported):
        apply_profile("cuda-f32-strict")


def test_deterministic_pins_and_restores():
    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    with deterministic("cpu-f32-strict"):
        assert torch.get_num_threads() == 1
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.get_float32_matmul_precision() == "highest"
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert torch.get_default_dtype() == torch.float32
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == before
