"""nbconvert: each cell's cost saved in the converted notebook.

    jupyter nbconvert --to notebook \
        --Exporter.preprocessors=jupyter_gpucost.headless.nbconvert.PriceCells nb.ipynb

runs the notebook with every cell priced (nbconvert's own ``ExecutePreprocessor``, with the
collector's hooks; no other executor). Given with ``--execute`` too, nbconvert's own
executor runs the notebook: this preprocessor then sets the collector's hooks on that
executor when the exporter builds it, and saves what the notebook priced itself (``%gpucost
auto on``, ``%%gpucost``), read from the execute replies of the cells that run executed.
Without this preprocessor, ``--execute`` leaves the notebook as it would without the
extension (the records travel in the replies' metadata, which nbconvert does not keep).
"""

from __future__ import annotations

from typing import Any

from nbconvert.preprocessors import ExecutePreprocessor

from .collect import CostCollector


class PriceCells(ExecutePreprocessor):
    """Runs the notebook with every cell priced, and writes the costs into it."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)  # type: ignore[no-untyped-call]
        #: the collector on nbconvert's own executor (``--execute``), set up before it runs
        self._on_theirs: CostCollector | None = None
        for other in getattr(self.parent, "_preprocessors", []):
            if isinstance(other, ExecutePreprocessor) and not isinstance(other, PriceCells):
                self._on_theirs = CostCollector(runner="nbconvert", price_all_cells=False)
                self._on_theirs.attach(other)

    def preprocess(self, nb: Any, resources: Any = None, km: Any = None) -> tuple[Any, Any]:
        already_run = bool(self.config.get("ExecutePreprocessor", {}).get("enabled", False))
        if already_run:
            # nbconvert's own ExecutePreprocessor ran every code cell just now, with the
            # collector's hooks: what the notebook priced itself is saved
            theirs = self._on_theirs or CostCollector(runner="nbconvert", price_all_cells=False)
            theirs.finish(nb)
            return nb, resources
        collector = CostCollector(runner="nbconvert")
        collector.attach(self)
        nb, resources = super().preprocess(nb, resources, km)
        collector.finish(nb)
        return nb, resources


__all__ = ["PriceCells"]
