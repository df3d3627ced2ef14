"""%gpucost check and %gpucost fit in a real kernel, and the estimator's arithmetic."""

from __future__ import annotations

import shutil

import pytest
from kernel_notebook import run_notebook, text

from jupyter_gpucost.kernel.commands.check import Facts, cudnn_text, findings
from jupyter_gpucost.kernel.commands.fit import (
    CONTEXT_BYTES,
    GB,
    GpuMemory,
    catalog_options,
    estimate,
    parse_size,
    report,
    shape,
)


def test_check_reports_the_cpu_build_and_the_missing_driver() -> None:
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "%gpucost check",
            "import torch\nprint(torch.__version__)",
            "# raises\n%gpucost check --verbose",
        ]
    )
    out = text(nb.cells[1])
    version = text(nb.cells[2]).strip()
    assert out.startswith("%gpucost check\n")
    assert f"  torch           {version}\n" in out
    assert "  built with      CPU only\n" in out
    assert "  cuDNN           not available\n" in out
    assert "  CUDA available  no\n" in out
    assert "  GPUs            none\n" in out
    if shutil.which("nvidia-smi") is None:
        assert "nvidia-smi not found" in out
        assert "  NVIDIA driver   not found: " in out
    assert f"note: torch {version} is a CPU-only build (and no GPU here)" in out
    assert out.rstrip().endswith("no mismatch found")
    assert "%gpucost check takes no options" in text(nb.cells[3])


def test_check_without_torch_does_not_import_it() -> None:
    # sys.modules["torch"] = None is how Python hides an installed package
    nb = run_notebook(
        [
            "import sys\nsys.modules['torch'] = None\n%load_ext jupyter_gpucost",
            "%gpucost check",
        ]
    )
    out = text(nb.cells[1])
    assert "  torch          torch not installed\n" in out
    assert "note: torch not installed: nothing to match against the GPUs" in out


def test_fit_without_a_gpu_lists_the_catalog_gpus_it_would_fit_on() -> None:
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "%gpucost fit 7B --dtype bf16",
            "%gpucost fit 7b --finetune",
            "%gpucost fit 70e9 --dtype nf4 --lora --batch 1 --seq 512",
            "# raises\n%gpucost fit seven",
            "# raises\n%gpucost fit 7B --dtype int4 --finetune",
            "# raises\n%gpucost fit",
            "# raises\n%gpucost fits 7B",
            "%gpucost",
        ]
    )
    c = nb.cells
    inference = text(c[1])
    assert inference.startswith("%gpucost fit: 7,000,000,000 parameters, bf16, inference\n")
    assert "  weights                     14.0 GB  7,000,000,000 params × 2 B (bf16)\n" in inference
    assert "  total                       16.1 GB\n" in inference
    assert "batch 1 × 2048 tokens (give --batch and --seq for yours)" in inference
    assert "no GPU here (" in inference
    assert "  1× L4 (24 GB): from $" in inference
    assert "  1× H100-80GB (80 GB): from $" in inference
    assert "  2× T4 (32 GB, split across GPUs): from $" in inference  # 16 GB is too small
    finetune = text(c[2])
    assert "full fine-tuning" in finetune
    assert "  fp32 master weights         28.0 GB  mixed precision\n" in finetune
    assert "  AdamW moments               56.0 GB  2 × fp32 per parameter\n" in finetune
    assert "  1× H200 (141 GB): from $" in finetune
    assert "1× H100-80GB" not in finetune
    assert "  2× H100-80GB (160 GB, split across GPUs)" in finetune
    qlora = text(c[3])
    assert "nf4, LoRA fine-tuning" in qlora
    assert "  weights                     35.0 GB  70,000,000,000 params × 0.5 B (nf4)\n" in qlora
    assert "batch 1 × 512 tokens" in qlora
    assert "'seven' is not a model size: write it like 7B, 1.5b, 350M or 70e9" in text(c[4])
    assert "usage: %gpucost fit SIZE [--dtype DTYPE]" in text(c[4])
    assert "full fine-tuning needs fp32, bf16 or fp16 weights, not int4" in text(c[5])
    assert "the following arguments are required: size" in text(c[6])
    assert "unknown subcommand 'fits'" in text(c[7])
    assert (
        "usage: %gpucost | %gpucost --help | %gpucost auto | %gpucost auto on|off | "
        "%gpucost budget | %gpucost budget AMOUNT|off"
    ) in text(c[7])
    # no argument: the prices, as before
    # no GPU here: the rate rule's two decimals, never "$0.0000/h"
    assert text(c[8]).startswith("jupyter-gpucost: cells are priced at $0.00/h (the shipped")


@pytest.mark.parametrize(
    ("written", "params"),
    [
        ("7B", 7_000_000_000),
        ("1.5b", 1_500_000_000),
        ("350M", 350_000_000),
        ("70e9", 70_000_000_000),
        ("125k", 125_000),
        ("1T", 1_000_000_000_000),
        ("8000", 8000),
    ],
)
def test_sizes_are_read_as_people_write_them(written: str, params: int) -> None:
    assert parse_size(written) == params


@pytest.mark.parametrize("written", ["seven", "7X", "-7B", "0", "1.5", "", "7 billion"])
def test_sizes_that_are_not_sizes_are_refused(written: str) -> None:
    with pytest.raises(ValueError, match=r"model size|whole number"):
        parse_size(written)


def test_inference_weights_are_params_times_bytes() -> None:
    est = estimate(7 * 10**9, "bf16")
    assert est.part("weights") == 14 * 10**9
    assert estimate(7 * 10**9, "fp32").part("weights") == 28 * 10**9
    assert estimate(7 * 10**9, "int8").part("weights") == 7 * 10**9
    assert estimate(7 * 10**9, "int4").part("weights") == 3_500_000_000
    hidden, layers = shape(7 * 10**9)
    assert (hidden, layers) == (4224, 33)
    assert est.part("KV cache") == 2 * layers * hidden * 2048 * 1 * 2
    assert est.part("CUDA context, workspace") == CONTEXT_BYTES
    assert est.total_bytes == 14 * 10**9 + est.part("KV cache") + CONTEXT_BYTES


def test_full_fine_tuning_costs_16_bytes_a_parameter_before_activations() -> None:
    for dtype in ("bf16", "fp16", "fp32"):
        est = estimate(7 * 10**9, dtype, finetune=True, batch=2, seq=1024)
        states = est.total_bytes - est.part("activations") - CONTEXT_BYTES
        assert states == 16 * 7 * 10**9, dtype
    mixed = estimate(7 * 10**9, "bf16", finetune=True, batch=2, seq=1024)
    assert mixed.part("fp32 master weights") == 28 * 10**9
    hidden, layers = shape(7 * 10**9)
    assert mixed.part("activations") == 34 * 1024 * 2 * hidden * layers


def test_lora_trains_one_percent_of_the_parameters() -> None:
    est = estimate(7 * 10**9, "nf4", lora=True)
    assert est.mode == "LoRA fine-tuning"
    assert est.part("weights") == 3_500_000_000
    assert est.part("LoRA adapters") == 70_000_000 * 16


def test_bad_estimates_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'bf17'"):
        estimate(10**9, "bf17")
    with pytest.raises(ValueError, match="--batch must be at least 1"):
        estimate(10**9, batch=0)


def test_the_verdict_on_the_gpus_here() -> None:
    est = estimate(7 * 10**9, "bf16")  # 16.1 GB
    h100 = GpuMemory("NVIDIA H100 80GB HBM3", 85_520_000_000, 80 * GB)
    busy = GpuMemory("NVIDIA H100 80GB HBM3", 85_520_000_000, 10 * GB)
    t4 = GpuMemory("Tesla T4", 15_360_000_000, 15 * GB)
    assert "fits on one GPU here (16.1 GB of 85.5 GB)" in report(est, [h100], "NVML")
    assert "not in the memory free now" in report(est, [busy], "NVML")
    two = report(est, [t4, t4], "NVML", catalog_options(est.total_bytes))
    assert "fits only split across the 2 GPUs (30.7 GB in all" in two
    assert "it would fit on these catalog GPUs" in two
    one = report(est, [t4], "NVML")
    assert "does not fit on the GPUs here: 16.1 GB needed, 15.4 GB on the largest" in one


def test_catalog_options_hold_the_estimate() -> None:
    need = 100 * GB
    options = catalog_options(need)
    assert options
    for o in options:
        assert o.memory_bytes * o.count >= need
        assert (o.memory_bytes * (o.count - 1)) < need
    assert [o.count for o in options] == sorted(o.count for o in options)
    assert catalog_options(10**15) == []


def test_cudnn_versions_read_both_numbering_schemes() -> None:
    assert cudnn_text(90100) == "9.1.0"
    assert cudnn_text(8902) == "8.9.2"
    assert cudnn_text(None) is None


def cuda_build(**kwargs: object) -> Facts:
    values: dict[str, object] = {
        "torch_version": "2.6.0+cu124",
        "torch_cuda": "12.4",
        "cuda_available": True,
        "cudnn": "9.1.0",
        "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        "torch_gpus": [("NVIDIA A100-SXM4-80GB", (8, 0))],
        "driver_version": "550.54.15",
        "driver_cuda": "12.4",
        "driver_how": "NVML",
        "driver_gpus": ["NVIDIA A100-SXM4-80GB"],
    }
    values.update(kwargs)
    return Facts(**values)  # type: ignore[arg-type]


def test_a_matching_install_has_no_warning() -> None:
    assert findings(cuda_build()) == ([], [])
    # an sm_89 GPU runs the sm_86 kernels (same major version)
    assert findings(cuda_build(torch_gpus=[("NVIDIA L4", (8, 9))])) == ([], [])


def test_mismatches_are_explained() -> None:
    warn, _ = findings(cuda_build(torch_cuda="12.8", driver_cuda="12.2"))
    assert warn[0].startswith("torch is built with CUDA 12.8, newer than the CUDA 12.2")
    warn, _ = findings(cuda_build(torch_cuda="12.4", driver_cuda="11.8", cuda_available=False))
    assert "supports CUDA up to 11.8: CUDA cannot start" in warn[0]
    assert "install a torch built for CUDA 11.x" in warn[0]
    assert warn[1].startswith("torch.cuda.is_available() is False although the driver lists 1")
    warn, _ = findings(
        cuda_build(torch_version="2.6.0+cpu", torch_cuda=None, cuda_available=False, torch_gpus=[])
    )
    assert warn == [
        "torch 2.6.0+cpu is a CPU-only build, but this machine has 1 NVIDIA GPU(s): cells run "
        "on the CPU. Install a CUDA build (https://pytorch.org/get-started/locally/)."
    ]
    warn, _ = findings(cuda_build(torch_gpus=[("NVIDIA RTX PRO 6000", (12, 0))]))
    assert "GPU 0 (NVIDIA RTX PRO 6000, sm_120) is not among the architectures" in warn[0]
    _, notes = findings(
        cuda_build(arch_list=["sm_80", "compute_90"], torch_gpus=[("NVIDIA B200", (10, 0))])
    )
    assert notes == [
        "GPU 0 (NVIDIA B200, sm_100) runs PTX compiled at first use (slow first start)"
    ]
    warn, _ = findings(cuda_build(driver_version=None, driver_cuda=None, driver_how="no NVML"))
    assert warn[0] == (
        "torch is built with CUDA 12.4, but no NVIDIA driver was found (no NVML): cells run "
        "on the CPU"
    )
