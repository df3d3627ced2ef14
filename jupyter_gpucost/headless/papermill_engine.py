"""papermill: ``papermill --engine gpucost IN.ipynb OUT.ipynb`` saves each cell's cost.

papermill's own engine (nbclient underneath, papermill's client and its saving of the
output notebook after each cell), with the collector's hooks: every cell priced, its
record in its metadata, the notebook's total at the end. Registered as the ``gpucost``
engine through the ``papermill.engine`` entry point.
"""

from __future__ import annotations

from typing import Any

from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine
from papermill.log import logger
from papermill.utils import merge_kwargs, remove_args

from .collect import CostCollector

#: the keyword ``jupyter gpucost run`` passes its collector with (through papermill)
COLLECTOR_KW = "gpucost_collector"


class _PricingClient(PapermillNotebookClient):  # type: ignore[misc]
    def __init__(self, nb_man: Any, collector: CostCollector, **kw: Any) -> None:
        super().__init__(nb_man, **kw)
        collector.attach(self)
        # papermill runs cells itself and never calls nbclient's end-of-notebook hook
        self.on_notebook_complete = None


class PricingEngine(NBClientEngine):  # type: ignore[misc]
    """papermill's nbclient engine, with every cell priced and its cost saved."""

    @classmethod
    def execute_managed_notebook(
        cls,
        nb_man: Any,
        kernel_name: str,
        log_output: bool = False,
        stdout_file: Any = None,
        stderr_file: Any = None,
        start_timeout: int = 60,
        execution_timeout: int | None = None,
        **kwargs: Any,
    ) -> Any:
        collector = kwargs.pop(COLLECTOR_KW, None)
        if not isinstance(collector, CostCollector):
            collector = CostCollector(runner="papermill")
        # as papermill's own engine: its arguments named the way nbclient names them
        kwargs = remove_args(["input_path"], **kwargs)
        safe_kwargs = remove_args(["timeout", "startup_timeout"], **kwargs)
        final_kwargs = merge_kwargs(
            safe_kwargs,
            timeout=execution_timeout if execution_timeout else kwargs.get("timeout"),
            startup_timeout=start_timeout,
            kernel_name=kernel_name,
            log=logger,
            log_output=log_output,
            stdout_file=stdout_file,
            stderr_file=stderr_file,
        )
        try:
            return _PricingClient(nb_man, collector, **final_kwargs).execute()
        finally:
            # saved by papermill right after (it writes the output notebook at the end,
            # whether the run finished, failed or was stopped); papermill's own end checks
            # every cell's papermill metadata, so no summary cell is added here
            collector.finish(nb_man.nb, summary_cell=False)
