"""Headless runs: each cell's cost saved in the notebook, the notebook's total beside it.

``execute(nb)`` runs a notebook with nbclient and a :class:`~.collect.CostCollector`;
papermill's engine (``papermill --engine gpucost``), nbconvert's preprocessor and ``jupyter
gpucost run`` use the same collector. See ``docs/headless.md``.
"""

from __future__ import annotations

from typing import Any

from .collect import CostCollector


def execute(nb: Any, *, summary_cell: bool = False, **client_kwargs: Any) -> Any:
    """Run ``nb`` (an nbformat notebook) in place with nbclient, every cell priced; returns
    it with ``metadata.gpucost`` on each priced cell and the notebook's summary."""
    from nbclient import NotebookClient

    collector = CostCollector(runner="nbclient", summary_cell=summary_cell)
    client = collector.attach(NotebookClient(nb, **client_kwargs))
    client.execute()
    return nb
