"""nbconvert: each cell's cost saved in the converted notebook.

    jupyter nbconvert --to notebook \
        --Exporter.preprocessors=jupyter_gpucost.headless.nbconvert.PriceCells nb.ipynb

runs the notebook with every cell priced (nbconvert's own ``ExecutePreprocessor``, with the
collector's hooks; no other executor). Given with ``--execute`` too, nbconvert has already run the
notebook: this preprocessor then only saves what the notebook priced itself (``%gpucost auto
on``, ``%%gpucost``) from the cells that run just executed.
"""

from __future__ import annotations

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
            # outputs are this run's
            for index, cell in enumerate(nb.cells):
                if cell.get("cell_type") == "code" and self._was_run(cell):
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


__all__ = ["PriceCells"]
