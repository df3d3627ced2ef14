"""torch_cuda(): torch as the notebook left it, never imported or started by the kernel side."""

from __future__ import annotations

import subprocess
import sys
from typing import Any


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.strip()


def test_a_notebook_without_torch_does_not_get_it_imported() -> None:
    out = _run(
        "import sys\n"
        "from jupyter_gpucost.kernel.cell.cuda import torch_cuda\n"
        "print(torch_cuda(), 'torch' in sys.modules)\n"
    )
    assert out == "None False"


def test_torch_without_cuda_started_is_not_used() -> None:
    # a CPU build, or a CUDA build whose notebook has not touched the GPU: no CUDA context
    out = _run(
        "import torch\n"
        "from jupyter_gpucost.kernel.cell.cuda import torch_cuda\n"
        "print(torch_cuda(), torch.cuda.is_initialized())\n"
    )
    assert out == "None False"


def test_the_peak_memory_is_torchs_own_figure_read_without_flattening(monkeypatch: Any) -> None:
    # the allocator's nested statistics as torch.cuda.memory_stats documents them (a part
    # of them; the H200 gave the same 314,572,800 bytes both ways after a 300 MiB tensor)
    import torch
    import torch.cuda.memory

    from jupyter_gpucost.kernel.cell.cuda import peak_allocated_bytes

    def stat(peak: int) -> dict[str, int]:
        return {"current": 512, "peak": peak, "allocated": peak * 2, "freed": peak * 2 - 512}

    def stats(device: int) -> dict[str, Any]:
        assert device == 0
        return {
            "allocated_bytes": {"all": stat(314_572_800), "large_pool": stat(314_572_800)},
            "reserved_bytes": {"all": stat(316_669_952)},
            "num_alloc_retries": 0,
        }

    monkeypatch.setattr(torch._C, "_cuda_memoryStats", stats, raising=False)
    monkeypatch.setattr(torch.cuda.memory, "is_initialized", lambda: True)
    assert torch.cuda.max_memory_allocated(0) == 314_572_800
    assert peak_allocated_bytes(torch, 0) == 314_572_800


def test_a_torch_without_the_nested_statistics_is_read_through_its_public_call() -> None:
    from types import SimpleNamespace

    from jupyter_gpucost.kernel.cell.cuda import peak_allocated_bytes

    calls: list[int] = []

    def public(device: int) -> int:
        calls.append(device)
        return 42

    torch = SimpleNamespace(_C=SimpleNamespace(), cuda=SimpleNamespace(max_memory_allocated=public))
    assert peak_allocated_bytes(torch, 1) == 42
    assert calls == [1]
