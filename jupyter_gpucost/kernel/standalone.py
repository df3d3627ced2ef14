"""A kernel with no jupyter-gpucost server meters itself.

Headless runs (``jupyter nbconvert --execute``, papermill, nbclient, ``jupyter gpucost
run``) have no server to hand down prices: the kernel reads its GPUs itself — NVML, or a
replayed trace when asked (``JUPYTER_GPUCOST_TELEMETRY=simulated``, or ``auto`` with no
NVML), labelled simulated everywhere its cost is shown — and prices them from the shipped
catalog, with the same rule as the server (the GPUs held for the cell's wall time).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from ..core.saved_cost import ENV_TELEMETRY, ENV_TRACE, TELEMETRY_CHOICES
from ..telemetry.base import GpuReading
from .prices import KernelPrices, from_catalog


class _Nvml(Protocol):
    @property
    def source(self) -> object: ...

    def read(self) -> tuple[GpuReading, ...]: ...


def telemetry_choice() -> str:
    value = os.environ.get(ENV_TELEMETRY, "nvml").strip().lower()
    return value if value in TELEMETRY_CHOICES else "nvml"


def simulated_readings() -> tuple[tuple[GpuReading, ...], str]:
    """The first frame of the trace named in the environment, and the trace's name."""
    from ..telemetry.simulated import SimulatedSource

    source = SimulatedSource(os.environ.get(ENV_TRACE) or None)
    source.open()  # a broken trace says so (SourceUnavailable): never a silent $0
    try:
        status = source.status()
        name = str(status.detail.get("trace", "")) if status.detail else ""
        return source.read(), name
    finally:
        source.close()


def kernel_prices(nvml: Callable[[], _Nvml]) -> KernelPrices:
    """The prices of the GPUs this kernel sees, from the shipped catalog."""
    choice = telemetry_choice()
    if choice == "simulated" or (choice == "auto" and nvml().source is None):
        readings, trace = simulated_readings()
        prices = from_catalog([(r.uuid, r.name, r.memory_total_bytes) for r in readings])
        return replace(prices, simulated=True, simulated_by=trace)
    readings = nvml().read()
    return from_catalog([(r.uuid, r.name, r.memory_total_bytes) for r in readings])
