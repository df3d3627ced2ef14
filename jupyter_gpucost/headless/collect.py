"""Moving each cell's cost into the notebook, and summing the notebook, in headless runs.

The kernel hands a priced cell's record over in the metadata of the cell's execute reply
(:mod:`jupyter_gpucost.kernel.cell.saved`); nothing is added to the cell's outputs. A
:class:`CostCollector` attached to an nbclient ``NotebookClient`` (nbclient itself,
papermill's engine, nbconvert's preprocessor, ``jupyter gpucost run``) reads it from each
reply *as the cell finishes in this run*, checks it, writes it into
``cell.metadata.gpucost`` and adds it to the run's total; at the end the notebook's
``metadata.gpucost`` holds the summary (exactly the sum of the cells). What a notebook
already carried from elsewhere is never summed: a sound record on a cell this run did not
execute is left as it was, a refused one is removed and named in the summary.

Notebooks saved by earlier versions carry the record as a hidden display output of the
MIME type :data:`~jupyter_gpucost.core.saved_cost.MIMETYPE`: a run removes every such output
(:func:`clean_outputs`), and never reads a record from one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, MutableMapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from ..core.currency import for_reader
from ..core.currency import symbol as currency_symbol
from ..core.i18n import current_language
from ..core.record_rules import Expected, TimeWindow, check_record
from ..core.saved_cost import (
    METADATA_KEY,
    MIMETYPE,
    NotebookSummary,
    Refused,
    SavedCell,
    parse_cell,
)
from .summary import summary_markdown

#: a cell or notebook as nbformat gives it (a dict with attribute access)
Node = Any
#: the tag of the summary cell a run appends (replaced on the next run)
SUMMARY_TAG = "gpucost-summary"
#: the code the runner sends (silently) before the first cell: price every cell
SETUP_CODE = (
    # loaded as %load_ext would, without its "already loaded" when the notebook says it too
    "import jupyter_gpucost.kernel.magics as _gpucost_magics\n"
    "_gpucost_magics.load(get_ipython())\n"
    "_gpucost_magics.auto(get_ipython(), ['on'])\n"
    "del _gpucost_magics\n"
)


class BudgetSpent(Exception):
    """The run's budget is spent: no further cell runs."""

    def __init__(self, cell_index: int, spent_micro: int) -> None:
        super().__init__(f"budget spent at cell {cell_index}")
        self.cell_index = cell_index
        self.spent_micro = spent_micro


def is_carrier(output: Node) -> bool:
    """An output an earlier version's kernel added to carry the record."""
    return output.get("output_type") == "display_data" and MIMETYPE in output.get("data", {})


def clean_outputs(cell: Node) -> bool:
    """Remove the outputs earlier versions added to carry a record; True if any was."""
    outputs = cell.get("outputs") or []
    kept = [o for o in outputs if not is_carrier(o)]
    if len(kept) == len(outputs):
        return False
    cell["outputs"] = kept
    return True


def reply_record(execute_reply: object) -> object | None:
    """The record the kernel sent with a cell's execute reply, if it sent one."""
    if not isinstance(execute_reply, Mapping):
        return None
    metadata = execute_reply.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    return metadata.get(METADATA_KEY)


class CostCollector:
    """nbclient hooks that save each cell's cost and sum the notebook."""

    def __init__(
        self,
        *,
        runner: str = "nbclient",
        price_all_cells: bool = True,
        summary_cell: bool = False,
        budget_micro: int | None = None,
        rate_per_hour: Decimal | None = None,
        currency: str | None = None,
        on_cell: Callable[[int, SavedCell | None, NotebookSummary], None] | None = None,
    ) -> None:
        self.summary = NotebookSummary(runner=runner)
        if currency is not None:  # what the run metered is in it, whatever the records say
            self.summary.currency = currency
        #: the currency this run prices cells in (``None``: read as the kernel reads it,
        #: at the first record); a record in another one is refused, never summed
        self.currency = currency
        self.price_all_cells = price_all_cells
        self.summary_cell = summary_cell
        self.budget_micro = budget_micro
        #: the rate this run prices cells at (``None``: read as the kernel reads it, at the
        #: first record)
        self.rate_per_hour = rate_per_hour
        self.on_cell = on_cell
        self.executed: set[int] = set()
        #: the index of the last cell that ran, and when the running one started
        self.last_executed: int | None = None
        self.last_cell_id: str | None = None
        #: each cell priced in this run, with its id
        self.priced: list[tuple[str, SavedCell]] = []
        self.cell_started: float | None = None
        #: when this run sent its first code to the kernel (the runner's clock, with its zone)
        self.run_started: datetime | None = None
        #: called once, when the run sends its first code to the kernel, and as each cell
        #: ends (a runner's meter)
        self.on_start: Callable[[], None] | None = None
        self.on_end: Callable[[], None] | None = None
        #: the client's event loop (a watcher acts on the kernel through it)
        self.loop: asyncio.AbstractEventLoop | None = None
        #: how many cells have ended in this run, and the one running (its index)
        self.cells_done = 0
        self.running: int | None = None
        #: the runner's budget is spent (its own meter said so): no further cell starts
        self.budget_spent = False
        self._client: Any = None
        self._set_up = False

    # -- wiring -----------------------------------------------------------------------
    def attach(self, client: Any) -> Any:
        """Set this collector's hooks on an nbclient ``NotebookClient``; returns it."""
        self._client = client
        client.on_cell_execute = self.on_cell_execute
        client.on_cell_executed = self.on_cell_executed
        client.on_notebook_complete = self.on_notebook_complete
        return client

    def cell_count(self) -> int | None:
        """How many cells the running notebook has (papermill's parameters included)."""
        nb = getattr(self._client, "nb", None)
        cells = None if nb is None else nb.get("cells")
        return len(cells) if isinstance(cells, list) else None

    def kernel_manager(self) -> Any:
        """The client's kernel manager (``None`` before the kernel starts)."""
        return getattr(self._client, "km", None)

    def notebook_manager(self) -> Any:
        """papermill's notebook manager (it saves the output notebook), if papermill runs."""
        return getattr(self._client, "nb_man", None)

    async def on_cell_execute(self, cell: Node, cell_index: int, **_kw: object) -> None:
        client = self._client
        if self.budget_spent:
            raise BudgetSpent(self.last_executed or 0, self.summary.total_micro_usd)
        if self.run_started is None:
            self.loop = asyncio.get_running_loop()
            self.run_started = datetime.now(UTC)
            if self.on_start is not None:
                self.on_start()
        self.running = cell_index
        if not self._set_up and self.price_all_cells and getattr(client, "kc", None) is not None:
            self._set_up = True
            from nbclient.util import ensure_async

            msg_id = await ensure_async(
                client.kc.execute(SETUP_CODE, silent=True, store_history=False)
            )
            await client.async_wait_for_reply(msg_id)
        self.cell_started = time.monotonic()

    def on_cell_executed(
        self, cell: Node, cell_index: int, execute_reply: object = None, **_kw: object
    ) -> None:
        self.cells_done += 1
        self.running = None
        if self.on_end is not None:
            self.on_end()
        self.executed.add(cell_index)
        self.last_executed = cell_index
        self.last_cell_id = cell.get("id")
        started, self.cell_started = self.cell_started, None
        elapsed_s = None if started is None else time.monotonic() - started
        clean_outputs(cell)
        record = reply_record(execute_reply)
        metadata: MutableMapping[str, Any] = cell.setdefault("metadata", {})
        metadata.pop(METADATA_KEY, None)  # what it carried before this run is gone
        saved: SavedCell | None = None
        if record is not None:
            now = datetime.now(UTC)
            try:
                saved = self.check(parse_cell(record, now=now), elapsed_s, now=now)
            except Refused as e:  # the notebook's code can hand one over too
                self.summary.ignored.append(
                    {"cell": cell_index, "cell_id": cell.get("id"), "reason": e.reason}
                )
        if saved is not None:
            metadata[METADATA_KEY] = saved.to_json()
            self.summary.add(saved)
            self.priced.append((str(cell.get("id") or f"cell-{cell_index + 1}"), saved))
        if self.on_cell is not None:
            self.on_cell(cell_index, saved, self.summary)
        if self.budget_spent or (
            self.budget_micro is not None and self.summary.total_micro_usd >= self.budget_micro
        ):
            raise BudgetSpent(cell_index, self.summary.total_micro_usd)

    def check(
        self, cell: SavedCell, elapsed_s: float | None, *, now: datetime | None = None
    ) -> SavedCell:
        """A record from the cell that just ran, against what the runner knows itself
        (:mod:`~jupyter_gpucost.core.record_rules`): the rate it prices at, the run's window
        in time, the time the cell took (the code a notebook runs can publish a record of
        our type too: it must not make its own cost smaller)."""
        now = now or datetime.now(UTC)
        # a run this collector did not see begin (nbconvert's --execute): any plausible time
        window = (
            TimeWindow.plausible(now)
            if self.run_started is None
            else TimeWindow.of_run(self.run_started, now)
        )
        check_record(
            started=cell.started,
            ended=cell.at,
            wall_s=cell.wall_s,
            rate_usd_per_hour=cell.rate_usd_per_hour,
            currency=cell.currency,
            expected=Expected(
                window=window,
                rate_usd_per_hour=self.expected_rate(),
                currency=self.expected_currency(),
                elapsed_s=elapsed_s,
            ),
        )
        return cell

    def expected_rate(self) -> Decimal:
        """The rate this run prices at: the runner's, else the kernel's rule read here."""
        if self.rate_per_hour is None:
            from .prices import runner_prices

            self.rate_per_hour = runner_prices().rate_per_hour
        return self.rate_per_hour

    def expected_currency(self) -> str:
        """The currency this run prices in: the runner's, else the kernel's read here; the
        summary's amounts are in it."""
        if self.currency is None:
            from .prices import runner_prices

            self.currency = runner_prices().currency
        self.summary.currency = self.currency
        return self.currency

    def on_notebook_complete(self, notebook: Node, **_kw: object) -> None:
        self.finish(notebook)

    # -- the end of a run -------------------------------------------------------------
    def finish(self, notebook: Node, *, summary_cell: bool | None = None) -> dict[str, object]:
        """Check what cells this run did not execute carry, then write the summary (and
        the summary cell, when asked here or at construction)."""
        if summary_cell is None:
            summary_cell = self.summary_cell
        for index, cell in enumerate(notebook.get("cells", [])):
            clean_outputs(cell)
            if index in self.executed:
                continue
            metadata = cell.get("metadata") or {}
            if METADATA_KEY not in metadata:
                continue
            try:
                parse_cell(metadata[METADATA_KEY])
            except Refused as e:
                del metadata[METADATA_KEY]
                self.summary.ignored.append(
                    {"cell": index, "cell_id": cell.get("id"), "reason": e.reason}
                )
        summary = self.summary.to_json()
        notebook.setdefault("metadata", {})[METADATA_KEY] = summary
        cells = notebook.setdefault("cells", [])
        cells[:] = [c for c in cells if SUMMARY_TAG not in c.get("metadata", {}).get("tags", [])]
        if summary_cell:
            import nbformat

            markdown = nbformat.v4.new_markdown_cell(  # type: ignore[no-untyped-call]
                summary_markdown(
                    self.summary,
                    for_reader(
                        self.summary.currency,
                        currency_symbol(self.summary.currency),
                        current_language(),
                    ),
                )
            )
            markdown.metadata["tags"] = [SUMMARY_TAG]
            cells.append(markdown)
        return summary
