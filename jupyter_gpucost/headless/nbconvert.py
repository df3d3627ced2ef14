"""nbconvert: each cell's cost saved in the converted notebook.

    jupyter nbconvert --to notebook \
        --Exporter.preprocessors=jupyter_gpucost.headless.nbconvert.PriceCells nb.ipynb

runs the notebook with every cell priced (nbconvert's own ``ExecutePreprocessor``, with the
collector's hooks; no other executor). Given with ``--execute`` too, nbconvert has already run the
notebook: this preprocessor then only saves what the notebook priced itself (``%gpucost auto
on``, ``%%gpucost``) from the cells that run just executed.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from nbconvert.preprocessors import ExecutePreprocessor

from .collect import CostCollector


class PriceCells(ExecutePreprocessor):
    """Runs the notebook with every cell priced, and writes the costs into it."""

    def preprocess(self, nb: Any, resources: Any = None, km: Any = None) -> tuple[Any, Any]:
        already_run = bool(self.config.get("ExecutePreprocessor", {}).get("enabled", False))
        collector = CostCollector(runner="nbconvert", price_all_cells=not already_run)
        if already_run:
            # nbconvert's own ExecutePreprocessor ran every code cell just now: their
            # outputs are this run's, and its timings (metadata.execution) say when
            run = [
                (index, cell)
                for index, cell in enumerate(nb.cells)
                if cell.get("cell_type") == "code" and self._was_run(cell)
            ]
            starts = [t[0] for t in (timing(c) for _, c in run) if t is not None]
            collector.run_started = min(starts) if starts else None
            for index, cell in run:
                took = timing(cell)
                collector.cell_started = None if took is None else time.monotonic() - took[1]
                collector.on_cell_executed(cell=cell, cell_index=index)
            collector.finish(nb)
            return nb, resources
        collector.attach(self)
        nb, resources = super().preprocess(nb, resources, km)
        collector.finish(nb)
        return nb, resources

    def _was_run(self, cell: Any) -> bool:
        tags = cell.get("metadata", {}).get("tags", [])
        skipped = self.skip_cells_with_tag in tags or not cell.get("source", "").strip()
        return not skipped and cell.get("execution_count") is not None


def timing(cell: Any) -> tuple[datetime, float] | None:
    """When a cell started and how long it took, as nbclient recorded it
    (``metadata.execution``: busy, then the reply); ``None`` where it did not."""
    execution = cell.get("metadata", {}).get("execution") or {}
    try:
        started = datetime.fromisoformat(str(execution["iopub.status.busy"]))
        ended = datetime.fromisoformat(str(execution["shell.execute_reply"]))
    except (KeyError, ValueError):
        return None
    if started.tzinfo is None or ended.tzinfo is None or ended < started:
        return None
    return started, (ended - started).total_seconds()


__all__ = ["PriceCells"]
