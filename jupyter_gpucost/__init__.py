"""jupyter-gpucost: what the notebook session costs on rented GPUs, live, in JupyterLab."""

from __future__ import annotations

from typing import Any

from ._version import __version__


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-gpucost"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .app import GpuCost

    return [{"module": "jupyter_gpucost", "app": GpuCost}]


__all__ = ["__version__"]
