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
