"""The IPython side of jupyter-gpucost: ``%load_ext jupyter_gpucost`` then ``%%gpucost``."""

from __future__ import annotations

from typing import Any


def load_ipython_extension(shell: Any) -> None:
    from .gpu_identity import install
    from .magics import load

    load(shell)
    # where NVML's pids are not ours (a container), the server learns which is this kernel's
    install(shell)


def unload_ipython_extension(shell: Any) -> None:
    from .gpu_identity import uninstall
    from .magics import unload

    unload(shell)
    uninstall(shell)
