"""torch_cuda(): torch as the notebook left it, never imported or started by the kernel side."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.strip()


def test_a_notebook_without_torch_does_not_get_it_imported() -> None:
    out = _run(
        "import sys\n"
        "from jupyter_gpucost.kernel.cuda import torch_cuda\n"
        "print(torch_cuda(), 'torch' in sys.modules)\n"
    )
    assert out == "None False"


def test_torch_without_cuda_started_is_not_used() -> None:
    # a CPU build, or a CUDA build whose notebook has not touched the GPU: no CUDA context
    out = _run(
        "import torch\n"
        "from jupyter_gpucost.kernel.cuda import torch_cuda\n"
        "print(torch_cuda(), torch.cuda.is_initialized())\n"
    )
    assert out == "None False"
