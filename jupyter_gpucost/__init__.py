"""jupyter-gpucost: what the notebook session costs on rented GPUs, live, in JupyterLab."""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-gpucost"}]


def _jupyter_server_extension_points() -> list[dict[str, object]]:
    from .server.app import GpuCost

    return [{"module": "jupyter_gpucost", "app": GpuCost}]


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext jupyter_gpucost``: the ``%%gpucost`` cell magic."""
    from .kernel import load_ipython_extension as load

    load(shell)


def unload_ipython_extension(shell: Any) -> None:
    from .kernel import unload_ipython_extension as unload

    unload(shell)


#: kernel-side tools, imported on first use: the server imports this package and must not
#: pay for (or need) IPython, ipywidgets or torch
_LAZY = {
    "guard": ("kernel.guard", None),
    "BudgetExceeded": ("kernel.guard", "BudgetExceeded"),
    "BudgetWarning": ("kernel.guard", "BudgetWarning"),
    "CostTicker": ("kernel.widgets", "CostTicker"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(f".{module_name}", __name__)
    # `jupyter_gpucost.guard` is the guard module, which can be called: guard(...)
    return module if attr is None else getattr(module, attr)


__all__ = [
    "BudgetExceeded",
    "BudgetWarning",
    "CostTicker",
    "__version__",
    "guard",
    "load_ipython_extension",
    "unload_ipython_extension",
]
