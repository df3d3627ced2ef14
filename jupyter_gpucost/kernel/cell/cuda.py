"""torch and CUDA as the notebook left them: found, never imported or started here.

The kernel's measurements (``%%gpucost``, auto mode, the guard, ``%gpucost fit``) use torch
only when the notebook has already imported it and initialised CUDA: importing torch
would cost seconds, and starting CUDA would create a context (hundreds of MB) on every
GPU of a notebook that never asked for one.
"""

from __future__ import annotations

import sys
from typing import Any, TypeAlias

#: the ``torch`` module: a module object has no type of its own to name, so it is untyped
Torch: TypeAlias = Any
#: a ``torch.cuda.Event``
CudaEvent: TypeAlias = Any


def torch_cuda() -> Torch | None:
    """torch, if the notebook imported it and CUDA is up; ``None`` otherwise."""
    torch: Torch | None = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch
    except Exception:
        return None
    return None


def peak_allocated_bytes(torch: Torch, device: int) -> int:
    """The peak memory torch's allocator has held on ``device`` since its last reset.

    ``torch.cuda.max_memory_allocated`` builds and flattens the allocator's whole
    statistics (about 160 entries) to return one number: a third of a millisecond per
    GPU on every measured cell. The same number is read from the nested statistics it
    flattens, and through the public call where this torch has no such statistics."""
    try:
        return int(torch._C._cuda_memoryStats(device)["allocated_bytes"]["all"]["peak"])
    except (AttributeError, KeyError, TypeError):
        return int(torch.cuda.max_memory_allocated(device))
