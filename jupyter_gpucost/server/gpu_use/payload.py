"""The body of ``GET /gpucost/api/kernels``: what each kernel cost (its GPU use), beside the
machine's cost while its cells ran, and the rows of no kernel; kernels + unattributed + idle
== total, exactly (in micro-units)."""

from __future__ import annotations

from ...core.i18n import _
from ...core.money import json_amount
from ...core.wire import KernelCostJson, KernelsDocument, KernelsMicro
from ..sampler import utc_now
from .attribution import Attribution
from .kernel_procs import uptime_s


def kernels_payload(
    attribution: Attribution | None,
    trees: dict[str, frozenset[int]],
    cells_by_kernel: dict[str, tuple[int, int]],
    now: float,
) -> KernelsDocument:
    """The kernels' costs from the latest attribution; ``trees``: each kernel's processes;
    ``cells_by_kernel``: each kernel's cells this session (their cost in micro-units, how
    many); ``now``: the wall clock, for uptimes."""
    if attribution is None:
        return {
            "as_of": utc_now().isoformat(),
            "pids_visible": True,
            "note": None,
            "total": 0.0,
            "idle": 0.0,
            "unattributed": 0.0,
            "minimum_charge": 0.0,
            # deprecated twins (docs/api.md, "Money keys"), here and below
            "total_usd": 0.0,
            "idle_usd": 0.0,
            "unattributed_usd": 0.0,
            "minimum_charge_usd": 0.0,
            "kernels": [],
        }
    kernels: list[KernelCostJson] = []
    # beside each kernel's GPU use: the machine's cost while its cells ran (a
    # different measure: the whole machine for each cell's wall time)
    for k in attribution.kernels:
        info = k.info
        cells_micro, cells = cells_by_kernel.get(info.id, (0, 0))
        cost, cells_cost = json_amount(k.cost_micro), json_amount(cells_micro)
        kernels.append(
            {
                "id": info.id,
                "name": info.name,
                "notebook_path": info.notebook_path,
                "execution_state": "ended" if k.ended else info.execution_state,
                "started": info.started.isoformat() if info.started else None,
                "uptime_s": None if k.ended else uptime_s(info, now),
                "pids": sorted(trees.get(info.id, ())),
                # the host pids this kernel identified as its own, per GPU (a container)
                "gpu_host_pids": {
                    str(i): sorted(pid for pid, owner in mine.items() if owner == info.id)
                    for i, mine in sorted(attribution.identified.items())
                    if info.id in mine.values()
                },
                "remote": info.pid is None,
                "gpu_share": {str(i): round(v, 6) for i, v in sorted(k.share.items())},
                "gpu_share_by": {str(i): by for i, by in sorted(k.share_by.items())},
                "memory_bytes": k.memory_bytes,
                "cost": cost,
                "cost_micro": k.cost_micro,
                "cells": cells,
                "cells_cost": cells_cost,
                "cells_cost_micro": cells_micro,
                "cost_usd": cost,
                "cost_micro_usd": k.cost_micro,
                "cells_cost_usd": cells_cost,
                "cells_cost_micro_usd": cells_micro,
            }
        )
    # the part of unattributed that is the billing rule's (minimum charge, rounding):
    # billed whether or not anything ran, so the panel names it apart
    adjustment = sum(g.adjustment_micro for g in attribution.snapshot.gpus)
    minimum = min(max(adjustment, 0), max(attribution.unattributed_micro, 0))
    total, idle = json_amount(attribution.total_micro), json_amount(attribution.idle_micro)
    unattributed = json_amount(attribution.unattributed_micro)
    micro: KernelsMicro = {
        "total": attribution.total_micro,
        "idle": attribution.idle_micro,
        "unattributed": attribution.unattributed_micro,
        "minimum_charge": minimum,
    }
    return {
        "as_of": attribution.snapshot.as_of.isoformat(),
        "pids_visible": attribution.pids_visible,
        "note": _(attribution.note) if attribution.note else None,
        "total": total,
        "idle": idle,
        "unattributed": unattributed,
        "minimum_charge": json_amount(minimum),
        "total_usd": total,
        "idle_usd": idle,
        "unattributed_usd": unattributed,
        "minimum_charge_usd": json_amount(minimum),
        # where kernels identify their GPU processes: the others, not from these kernels
        "other_processes": [
            {"gpu": o.gpu_index, "host_pid": o.host_pid, "memory_bytes": o.memory_bytes}
            for o in attribution.others
        ],
        "micro": micro,
        "micro_usd": micro,
        "kernels": kernels,
    }
