"""A priced cell's record for the notebook file (``metadata.gpucost``, schema in
:mod:`jupyter_gpucost.core.saved_cost`).

The kernel cannot write the notebook: it publishes the record as a display output of its
own MIME type (with a one-line ``text/plain`` for front ends that do not know it), and
whoever holds the notebook moves it into the cell's metadata — JupyterLab's and Notebook
7's front end, or the headless runners (:mod:`jupyter_gpucost.headless`).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from ...core.i18n import _
from ...core.money import rate as money_rate
from ...core.money import status_bar, to_usd
from ...core.saved_cost import MIMETYPE, SavedCell, SavedGpu
from .prices import KernelPrices

#: ``0`` turns the record off (nothing published into the notebook)
ENV_SAVE = "JUPYTER_GPUCOST_SAVE"


def iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat()


def saved_cell(
    prices: KernelPrices,
    *,
    cost_micro_usd: int,
    wall_s: float,
    started_epoch_s: float,
    mode: str,
    status: str,
    gpu_busy_s: dict[int, float] | None = None,
) -> SavedCell:
    return SavedCell(
        cost_micro_usd=cost_micro_usd,
        wall_s=round(wall_s, 6),
        rate_usd_per_hour=prices.rate_usd_per_hour(),
        gpus=tuple(SavedGpu(name, price) for name, price in prices.gpus.values()),
        base_usd_per_hour=prices.base_usd_per_hour,
        priced_by=prices.source,
        mode=mode,
        status=status,
        started=iso(started_epoch_s),
        at=iso(started_epoch_s + wall_s),
        simulated=prices.simulated,
        simulated_by=prices.simulated_by,
        gpu_busy_s={str(i): round(s, 6) for i, s in gpu_busy_s.items()} if gpu_busy_s else None,
    )


def summary_line(cell: SavedCell, symbol: str) -> str:
    """The record's one line, for a front end that does not know its MIME type."""
    text = _("gpucost: {cost} · {seconds} s at {rate}{simulated}")
    simulated = _(" (simulated GPUs)") if cell.simulated else ""
    return text.format(
        cost=status_bar(to_usd(cell.cost_micro_usd), symbol),
        seconds=f"{cell.wall_s:.2f}",
        rate=money_rate(cell.rate_usd_per_hour, symbol),
        simulated=simulated,
    )


def in_a_kernel() -> bool:
    """Whether IPython runs as a Jupyter kernel (terminal IPython has no notebook file)."""
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def publish(cell: SavedCell, cell_id: str | None, line: str) -> bool:
    """Show the record as a display output of its own, ``line`` its plain text; False
    when records are turned off (``JUPYTER_GPUCOST_SAVE=0``) or there is no notebook (a
    terminal IPython)."""
    if os.environ.get(ENV_SAVE, "1") == "0" or not in_a_kernel():
        return False
    from IPython.display import publish_display_data

    record = cell.to_json()
    if cell_id:
        record["cell_id"] = cell_id
    publish_display_data(  # type: ignore[no-untyped-call]
        {MIMETYPE: record, "text/plain": line},
        metadata={MIMETYPE: {"carrier": True}},
    )
    return True
