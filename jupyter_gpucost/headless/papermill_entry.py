"""The ``gpucost`` engine as papermill's entry point names it, importing nothing of papermill.

papermill loads every engine's entry point while it is itself being imported, so an entry
point whose module imports papermill would be loaded half-made when that module is what
imported papermill first (``import jupyter_gpucost.headless.papermill_engine`` before
``import papermill``). This stand-in class answers every attribute papermill asks of an
engine (``execute_notebook``, ``nb_kernel_name``, ``nb_language``) from the real engine in
:mod:`.papermill_engine`, imported on first use.
"""

from __future__ import annotations


class _FromTheEngine(type):
    def __getattr__(cls, name: str) -> object:
        from .papermill_engine import PricingEngine as Engine

        return getattr(Engine, name)


class GpuCostEngine(metaclass=_FromTheEngine):
    """papermill's nbclient engine, with every cell priced and its cost saved."""
