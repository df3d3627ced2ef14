"""jupyter-gpucost: what the notebook session costs on rented GPUs, live, in JupyterLab."""

from __future__ import annotations

from typing import Any

from ._version import __version__


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-gpucost"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .app import GpuCost

    return [{"module": "jupyter_gpucost", "app": GpuCost}]


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext jupyter_gpucost``: the ``%%gpucost`` cell magic."""
    from .kernel import load_ipython_extension as load

    load(shell)


def unload_ipython_extension(shell: Any) -> None:
    from .kernel import unload_ipython_extension as unload

    unload(shell)


__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]
