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


# ------------------------------------------------------------------ hardware classes


def test_native_profiles_name_their_hardware_class_portable_pins_none():
    strict = determinism.PROFILES["cpu-f32-strict"].pins()
    assert strict == {"class": "x86-64-avx2", "torch": "2.13.0", "device": "cpu", "threads": 1,
                      "aten_capability": "AVX2", "blas_mode": "MKL_CBWR=COMPATIBLE", "onednn": False,
                      "cuda_capability": None}
    assert determinism.PROFILES["cuda-f32-strict"].pins()["cuda_capability"] == "9.0"
    portable = determinism.PROFILES["portable-f32"].pins()
    assert portable["class"] == "any" and portable["threads"] is None
    assert portable["aten_capability"] is portable["blas_mode"] is portable["cuda_capability"] is None
    assert portable["onednn"] is None


def test_strict_class_runs_without_onednn_and_restores_it():
    """oneDNN picks kernels by ISA and cache size on its own: the class's convolutions go through the BLAS."""
    torch.backends.mkldnn.enabled = True
    with deterministic("cpu-f32-strict"):
        assert torch.backends.mkldnn.enabled is False
        with deterministic("portable-f32"):
            assert torch.backends.mkldnn.enabled is False      # portable never calls it: left as it was
    assert torch.backends.mkldnn.enabled is True


def test_a_plain_process_pins_the_strict_class_itself():
    """`import verity` sets the class's ATen and MKL pins when the operator set none, so any x86-64 CPU with
    AVX2, Intel or AMD, AVX-512 or not, serves cpu-f32-strict from a plain process."""
    import os
    import subprocess
    import sys

    code = ("import verity, torch\n"
            "from verity.engine.determinism import check_environment as c\n"
            "c('portable-f32')\n"
            "c('cpu-f32-strict')\n"
            "print(torch.backends.cpu.get_cpu_capability())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "AVX2"


def test_strict_class_refuses_another_blas_branch(monkeypatch):
    monkeypatch.setenv("MKL_CBWR", "AVX2")                      # Intel-only: MKL runs AUTO on other vendors
    with pytest.raises(ProfileUnsupported, match="MKL_CBWR=COMPATIBLE"):
        check_environment("cpu-f32-strict")
    check_environment("portable-f32")  # pins no BLAS branch


def test_strict_class_refuses_other_aten_kernels(monkeypatch):
    monkeypatch.setattr(determinism.torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    with pytest.raises(ProfileUnsupported, match="ATEN_CPU_CAPABILITY=avx2"):
        check_environment("cpu-f32-strict")
    check_environment("portable-f32")


def test_cuda_class_refuses_another_architecture(monkeypatch):
    monkeypatch.setattr(determinism.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(determinism.torch.cuda, "get_device_capability", lambda *a: (8, 0))
    with pytest.raises(ProfileUnsupported, match=r"pins \(9, 0\)"):
        check_environment("cuda-f32-strict")


def test_a_process_on_default_aten_kernels_serves_portable_not_strict():
    """A real process whose ATen dispatch is forced to the kernels a CPU without AVX2 runs."""
    import os
    import subprocess
    import sys

    code = ("from verity.engine.determinism import check_environment as c\n"
            "from verity.errors import ProfileUnsupported\n"
            "c('portable-f32')\n"
            "try:\n    c('cpu-f32-strict'); print('served')\n"
            "except ProfileUnsupported as e:\n    print('refused', e)\n")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    env.pop("MKL_CBWR", None)  # `import verity` sets the class's branch itself
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused") and "DEFAULT" in out.stdout, out.stdout
