"""The IPython side of jupyter-gpucost: ``%load_ext jupyter_gpucost`` then ``%%gpucost``."""

from __future__ import annotations

from typing import Any


def load_ipython_extension(shell: Any) -> None:
    from .magics import load

    load(shell)


def unload_ipython_extension(shell: Any) -> None:
    from .magics import unload

    unload(shell)
