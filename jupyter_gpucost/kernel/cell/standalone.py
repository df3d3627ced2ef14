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
from decimal import Decimal
from typing import Protocol

from ...core.saved_cost import ENV_DETECT, ENV_DMI, ENV_TELEMETRY, ENV_TRACE, TELEMETRY_CHOICES
from ...telemetry.base import GpuReading
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
    from ...telemetry.simulated import SimulatedSource

    source = SimulatedSource(os.environ.get(ENV_TRACE) or None)
    source.open()  # a broken trace says so (SourceUnavailable): never a silent $0
    try:
        status = source.status()
        name = str(status.detail.get("trace", "")) if status.detail else ""
        return source.read(), name
    finally:
        source.close()


def kernel_prices(nvml: Callable[[], _Nvml]) -> KernelPrices:
    """The prices of the GPUs this kernel sees, from the shipped catalog (for the detected
    machine, when asked)."""
    choice = telemetry_choice()
    simulated, trace = False, ""
    if choice == "simulated" or (choice == "auto" and nvml().source is None):
        readings, trace = simulated_readings()
        simulated = True
    else:
        readings = nvml().read()
    found = [(r.uuid, r.name, r.memory_total_bytes) for r in readings]
    machine = machine_prices(found) if os.environ.get(ENV_DETECT) == "1" else None
    prices = machine or from_catalog(found)
    return replace(prices, simulated=True, simulated_by=trace) if simulated else prices


def machine_prices(readings: list[tuple[str, str, int | None]]) -> KernelPrices | None:
    """The GPUs priced as the server prices them on this machine: the machine detected
    from its DMI files and its cloud's metadata service (the endpoints its SDKs honour),
    priced whole where the catalog has the instance; ``None`` when no machine is found."""
    from ...cloud.detect import DEFAULT_DMI_PATH, DetectSettings, Endpoints, detect
    from ...core.attached_gpus import load_vm_rows
    from ...core.catalog import PricePolicy, load_catalog
    from ...core.instance_prices import AdminPrices, load_instance_rows, plan_prices

    environ = dict(os.environ)
    endpoints = Endpoints.from_environ(environ, azure_imds="")
    settings = DetectSettings(
        dmi_path=environ.get(ENV_DMI) or DEFAULT_DMI_PATH, endpoints=endpoints
    )
    machine = detect(settings, environ)
    if machine is None:
        return None
    catalog = load_catalog()
    plan = plan_prices(
        AdminPrices(),
        provider=machine.provider,
        instance_type=machine.instance_type,
        market=machine.market,
        shared=machine.shared,
        providers=catalog.providers,
        rows=load_instance_rows(),
        vms=load_vm_rows(),
        region=machine.region,
    )
    whole = plan.whole
    policy = PricePolicy(
        catalog=catalog,
        provider=plan.provider,
        market=plan.market,
        whole=None if whole is None else {whole.row.gpu_model: whole.per_gpu},
        region=plan.region,
    )
    gpus: dict[str, tuple[str, Decimal | None]] = {}
    for uuid, name, memory in readings:
        price = policy.price_for(name, memory)
        gpus[uuid] = (name, None if price is None else price.per_gpu_hour)
    what = " ".join(x for x in (machine.provider, machine.instance_type, plan.market) if x)
    how = (
        "whole-instance price"
        if whole is not None
        else "VM + each GPU"
        if plan.vm is not None
        else plan.note or "per-GPU prices"
    )
    return KernelPrices(
        gpus=gpus,
        base_per_hour=plan.base_per_hour(Decimal(0)),
        source=f"the shipped catalog for this {what} machine ({how}): no jupyter-gpucost "
        "server for this kernel",
        from_server=False,
    )
