"""A priced cell's record for the notebook file (``metadata.gpucost``, schema in
:mod:`jupyter_gpucost.core.saved_cost`).

The kernel cannot write the notebook, and it adds nothing to a cell's outputs: it hands the
record over in the metadata of the cell's ``execute_reply`` (the message ipykernel already
sends with every cell, whose ``metadata.started`` JupyterLab and nbclient read for
``metadata.execution``), under the key ``gpucost``. Whoever holds the notebook writes it
into the cell's metadata — JupyterLab's and Notebook 7's front end, or the headless runners
(:mod:`jupyter_gpucost.headless`); a client that knows nothing of us drops it with the rest
of the reply's metadata, and the notebook is as it would be without the extension.

ipykernel builds that metadata in ``Kernel.finish_metadata(parent, metadata,
reply_content)`` after the cell (and its ``post_run_cell`` hooks) ran; :func:`install` wraps
the kernel's method once, and the record a hook left for the request being answered is
added there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ...core.saved_cost import METADATA_KEY, SavedCell, SavedGpu
from .prices import KernelPrices

#: ``0`` turns the record off (nothing handed over for the notebook)
ENV_SAVE = "JUPYTER_GPUCOST_SAVE"
#: the key of the record in the execute reply's metadata (the same as in the notebook)
REPLY_KEY = METADATA_KEY
#: records waiting for their reply, at most this many (a reply never sent is forgotten)
MAX_PENDING = 16

#: ipykernel's ``finish_metadata(parent, metadata, reply_content)``
FinishMetadata = Callable[[Mapping[str, Any], dict[str, Any], Mapping[str, Any]], dict[str, Any]]


def iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat()


def saved_cell(
    prices: KernelPrices,
    *,
    cost_micro: int,
    wall_s: float,
    started_epoch_s: float,
    mode: str,
    status: str,
    gpu_busy_s: dict[int, float] | None = None,
) -> SavedCell:
    return SavedCell(
        cost_micro_usd=cost_micro,
        wall_s=round(wall_s, 6),
        rate_usd_per_hour=prices.rate_per_hour(),
        gpus=tuple(SavedGpu(name, price) for name, price in prices.gpus.values()),
        base_usd_per_hour=prices.base_per_hour,
        priced_by=prices.source,
        mode=mode,
        status=status,
        started=iso(started_epoch_s),
        at=iso(started_epoch_s + wall_s),
        simulated=prices.simulated,
        simulated_by=prices.simulated_by,
        gpu_busy_s={str(i): round(s, 6) for i, s in gpu_busy_s.items()} if gpu_busy_s else None,
        currency=prices.currency,
    )


def in_a_kernel() -> bool:
    """Whether IPython runs as a Jupyter kernel (terminal IPython has no notebook file)."""
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _msg_id(parent: object) -> str:
    header = parent.get("header") if isinstance(parent, Mapping) else None
    msg_id = header.get("msg_id") if isinstance(header, Mapping) else None
    return msg_id if isinstance(msg_id, str) else ""


class ReplyRecords:
    """The records waiting for their execute reply, by the request's message id."""

    def __init__(self, kernel: object) -> None:
        self.kernel = kernel
        self.pending: dict[str, dict[str, Any]] = {}

    def current_request(self) -> str:
        """The message id of the request the kernel is running (ipykernel's parent)."""
        get_parent = getattr(self.kernel, "get_parent", None)
        try:
            return _msg_id(get_parent("shell")) if callable(get_parent) else ""
        except Exception:  # an older kernel's signature: one request at a time anyway
            return ""

    def put(self, record: dict[str, Any]) -> None:
        """Hand ``record`` over with the reply to the running request (the last one put
        for a request is the one sent)."""
        request = self.current_request()
        self.pending.pop(request, None)
        self.pending[request] = record
        while len(self.pending) > MAX_PENDING:
            del self.pending[next(iter(self.pending))]

    def finish(self, original: FinishMetadata) -> FinishMetadata:
        def finish_metadata(
            parent: Mapping[str, Any], metadata: dict[str, Any], reply_content: Mapping[str, Any]
        ) -> dict[str, object]:
            metadata = original(parent, metadata, reply_content)
            record = self.pending.pop(_msg_id(parent), None)
            if record is None and "" in self.pending:
                record = self.pending.pop("")
            if record is not None and isinstance(metadata, dict):
                metadata[REPLY_KEY] = record
            return metadata

        return finish_metadata


def install(shell: object) -> ReplyRecords | None:
    """The kernel's :class:`ReplyRecords`, set up once (its ``finish_metadata`` wrapped);
    None outside a Jupyter kernel (a terminal IPython has no notebook file)."""
    kernel = getattr(shell, "kernel", None) if shell is not None else None
    if kernel is None:
        return None
    records = getattr(kernel, "gpucost_replies", None)
    if isinstance(records, ReplyRecords):
        return records
    records = ReplyRecords(kernel)
    # the instance's attribute: ipykernel calls ``self.finish_metadata(...)``
    setattr(kernel, "finish_metadata", records.finish(kernel.finish_metadata))  # noqa: B010
    setattr(kernel, "gpucost_replies", records)  # noqa: B010
    return records


def hand_over(cell: SavedCell) -> bool:
    """Send the record with the running cell's execute reply; False when records are
    turned off (``JUPYTER_GPUCOST_SAVE=0``) or there is no notebook (a terminal IPython)."""
    if os.environ.get(ENV_SAVE, "1") == "0":
        return False
    from IPython import get_ipython

    records = install(get_ipython())
    if records is None:
        return False
    records.put(cell.to_json())
    return True
