"""``jupyter gpucost run NOTEBOOK``: a headless run, priced, within a budget.

papermill runs the notebook (its parameters, its saving of the output notebook after each
cell; nbclient underneath) with the ``gpucost`` engine: every cell priced by the kernel,
its cost saved in its metadata, the total in the notebook's. With ``--budget`` a watcher
interrupts the kernel once the cells' cost, plus the running cell's so far at the rate in
force, reaches the budget; the partial notebook is saved with each cell that ran, and a note
where it stopped. Exit codes (:data:`EXIT_CODES`) say how the run ended.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NoReturn, TextIO

from ..core.billing import cost_micro_usd
from ..core.i18n import _
from ..core.money import round_micro, status_bar, to_usd
from ..core.saved_cost import (
    ENV_DETECT,
    ENV_TELEMETRY,
    ENV_TRACE,
    TELEMETRY_CHOICES,
    NotebookSummary,
    SavedCell,
)
from .collect import BudgetSpent, CostCollector

EXIT_OK = 0
EXIT_CELL_ERROR = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3
EXIT_REFUSED = 4
EXIT_STOP_FAILED = 5
#: documented in docs/headless.md
EXIT_CODES = {
    EXIT_OK: "the notebook ran to the end",
    EXIT_CELL_ERROR: "a cell raised an error: the run stopped there (notebook saved)",
    EXIT_USAGE: "the command line is wrong",
    EXIT_BUDGET: "the budget was spent: the run stopped there (notebook saved)",
    EXIT_REFUSED: "the run was refused: a budget cannot be enforced (no price here)",
    EXIT_STOP_FAILED: "the run ended but the machine could not be stopped",
}
#: how often the watcher looks at the running cell's cost
WATCH_INTERVAL_S = 0.1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="jupyter gpucost run",
        description=_("Run a notebook headless, every cell priced, within a budget."),
    )
    p.add_argument("notebook", help=_("the notebook to run"))
    p.add_argument("-o", "--output", help=_("where to save the run (default NAME.gpucost.ipynb)"))
    p.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help=_("a papermill parameter (repeatable)"),
    )
    p.add_argument("--budget", help=_("stop when the run has cost this much (USD)"))
    p.add_argument(
        "--telemetry",
        choices=TELEMETRY_CHOICES,
        default=os.environ.get(ENV_TELEMETRY, "auto"),
        help=_("where the GPUs are read: NVML, a simulated trace, or auto (NVML, else simulated)"),
    )
    p.add_argument("--trace", help=_("the simulated trace (a shipped name or a file)"))
    p.add_argument(
        "--no-detect-machine",
        dest="detect_machine",
        action="store_false",
        help=_("do not detect the cloud machine (its prices are then per GPU)"),
    )
    p.add_argument("-k", "--kernel", default=None, help=_("the kernel to run it with"))
    p.add_argument("--no-summary", action="store_true", help=_("add no summary cell at the end"))
    p.add_argument("--quiet", action="store_true", help=_("no progress on the terminal"))
    p.add_argument(
        "--ledger",
        default=None,
        help=_(
            "the ledger to add the run to (a SQLAlchemy URL, or none); default: this "
            "machine's jupyter-gpucost ledger, if a server has made one"
        ),
    )
    p.add_argument(
        "--stop-instance-when-done",
        action="store_true",
        help=_("stop this machine through its cloud when the run ends"),
    )
    p.add_argument(
        "--stop-command",
        default=None,
        help=_("the command that stops this machine (instead of its cloud's API)"),
    )
    return p


def parse_value(text: str) -> object:
    """A parameter's value as papermill's ``-p`` reads it: bool, None, int, float or text."""
    words: dict[str, object] = {"True": True, "False": False, "None": None}
    if text in words:
        return words[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def parse_budget(text: str | None) -> int | None:
    """The budget in micro-dollars; a usage error for anything but a positive amount."""
    if text is None:
        return None
    try:
        amount = Decimal(text)
    except InvalidOperation:
        amount = Decimal(-1)
    if not amount.is_finite() or amount <= 0 or amount > Decimal(10**9):
        parser().error(
            _("--budget must be a positive amount of dollars, not {text!r}").format(text=text)
        )
    return int((amount * 1_000_000).to_integral_value())


@dataclass
class Priced:
    rate_usd_per_hour: Decimal
    unpriced: list[str]
    simulated: bool


def runner_prices() -> Priced:
    """The prices the kernel will use (same machine, same environment, same rule)."""
    from ..kernel.cell.measure import prices

    p = prices()
    unpriced = [name for name, price in p.gpus.values() if price is None]
    return Priced(p.rate_usd_per_hour(), unpriced, p.simulated)


class Progress:
    """One line per cell on the terminal: a bar of the budget, the cost so far."""

    def __init__(self, total_cells: int, budget_micro_usd: int | None, out: TextIO) -> None:
        self.total_cells = total_cells
        self.budget = budget_micro_usd
        self.out = out
        #: the running notebook's own count (papermill adds a parameters cell)
        self.count: Callable[[], int | None] = lambda: None

    def __call__(self, index: int, cell: SavedCell | None, summary: NotebookSummary) -> None:
        cost = "-" if cell is None else status_bar(to_usd(cell.cost_micro_usd), "$")
        total = status_bar(to_usd(summary.total_micro_usd), "$")
        line = _("cell {i}/{n}: {cost}, {total} so far").format(
            i=index + 1, n=self.count() or self.total_cells, cost=cost, total=total
        )
        if self.budget:
            used = min(summary.total_micro_usd / self.budget, 1.0)
            filled = round(used * 20)
            bar = "#" * filled + "." * (20 - filled)
            line += f" [{bar}] " + _("{percent} of the {budget} budget").format(
                percent=f"{used:.0%}", budget=status_bar(to_usd(self.budget), "$")
            )
        print(line, file=self.out, flush=True)


class BudgetWatch:
    """Interrupts the kernel when the run's cost, the running cell's included, reaches
    the budget (the kernel's own record of the cell then says what it cost)."""

    def __init__(self, collector: CostCollector, budget_micro_usd: int, rate: Decimal) -> None:
        self.collector = collector
        self.budget = budget_micro_usd
        self.rate = rate
        self.fired = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpucost-budget", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def spent_micro_usd(self) -> int:
        running = 0
        started = self.collector.cell_started
        if started is not None:
            elapsed_us = round((time.monotonic() - started) * 1_000_000)
            running = round_micro(cost_micro_usd(self.rate, elapsed_us))
        return self.collector.summary.total_micro_usd + running

    def _run(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            if self.fired or self.spent_micro_usd() < self.budget:
                continue
            pid = self.collector.kernel_pid()
            if pid is not None:
                self.fired = True
                os.kill(pid, signal.SIGINT)


def default_output(notebook: str) -> str:
    path = Path(notebook)
    return str(path.with_name(f"{path.stem}.gpucost.ipynb"))


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = parser().parse_args(argv)
    out = out or sys.stderr
    budget = parse_budget(args.budget)
    os.environ[ENV_TELEMETRY] = args.telemetry
    if args.trace:
        os.environ[ENV_TRACE] = args.trace
    # the machine priced as the server prices it (detected once, here and in the kernel)
    os.environ[ENV_DETECT] = "1" if args.detect_machine else "0"
    priced = runner_prices()
    if budget is not None and (priced.unpriced or priced.rate_usd_per_hour <= 0):
        what = ", ".join(priced.unpriced) or _("no GPU and no instance price here")
        text = _("gpucost: a budget cannot be enforced: {what} (no price). Nothing was run.")
        print(text.format(what=what), file=out)
        return EXIT_REFUSED
    code = run_notebook(args, budget, priced, out)
    if args.stop_instance_when_done and not stop_machine(args.stop_command, out):
        return code if code != EXIT_OK else EXIT_STOP_FAILED
    return code


def run_notebook(args: argparse.Namespace, budget: int | None, priced: Priced, out: TextIO) -> int:
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from .papermill_engine import COLLECTOR_KW

    output = args.output or default_output(args.notebook)
    source = nbformat.read(args.notebook, as_version=4)  # type: ignore[no-untyped-call]
    cells = len(source.cells)
    # papermill needs a kernel: the notebook's, else Python's
    kernel = args.kernel or (None if source.metadata.get("kernelspec") else "python3")
    progress = None if args.quiet else Progress(cells, budget, out)
    collector = CostCollector(
        runner="jupyter gpucost run",
        summary_cell=not args.no_summary,
        budget_micro_usd=budget,
        rate_usd_per_hour=priced.rate_usd_per_hour,
        on_cell=progress,
    )
    if progress is not None:
        progress.count = collector.cell_count
    watch = BudgetWatch(collector, budget, priced.rate_usd_per_hour) if budget else None
    if watch is not None:
        watch.start()
    kw: dict[str, Any] = {COLLECTOR_KW: collector}
    code = EXIT_OK
    try:
        papermill.execute_notebook(
            args.notebook,
            output,
            parameters={name: parse_value(value) for name, value in args.parameter},
            engine_name="gpucost",
            kernel_name=kernel,
            language=None if source.metadata.get("kernelspec") else "python",
            progress_bar=False,
            **kw,
        )
    except BudgetSpent:
        code = EXIT_BUDGET
    except PapermillExecutionError:
        code = EXIT_BUDGET if watch is not None and watch.fired else EXIT_CELL_ERROR
    finally:
        if watch is not None:
            watch.stop()
    if code == EXIT_BUDGET:
        index = collector.last_executed or 0
        note = _(
            "gpucost: the run was stopped at cell {i}: its budget was spent; the cells after "
            "it did not run."
        ).format(i=index + 1)
        collector.summary.stopped = {"cell": index, "cell_id": collector.last_cell_id, "note": note}
    finish(output, collector, summary_cell=not args.no_summary)
    ledger = record_in_ledger(args.ledger, collector, args.notebook, out)
    total = status_bar(to_usd(collector.summary.total_micro_usd), "$")
    if code == EXIT_BUDGET:
        text = _(
            "gpucost: stopped at the {budget} budget after cell {i}: {total} spent. Saved: {path}"
        )
        print(
            text.format(
                budget=status_bar(to_usd(budget or 0), "$"),
                i=(collector.last_executed or 0) + 1,
                total=total,
                path=output,
            ),
            file=out,
        )
    else:
        text = _("gpucost: the run cost {total} ({n} cells priced). Saved: {path}")
        print(text.format(total=total, n=collector.summary.cells, path=output), file=out)
    if ledger:
        print(_("gpucost: added to the ledger {url}").format(url=ledger), file=out)
    return code


def record_in_ledger(
    choice: str | None, collector: CostCollector, notebook: str, out: TextIO
) -> str | None:
    """Add the run to the ledger (the one named, else this machine's); where, or None."""
    from .ledger import append_run, default_ledger_url

    url = default_ledger_url() if choice is None else None if choice == "none" else choice
    if not url:
        return None
    try:
        append_run(url, collector.priced, notebook)
    except Exception as e:  # the run is saved: a ledger that cannot be written is said
        text = _("gpucost: the run could not be added to the ledger: {error}")
        print(text.format(error=f"{type(e).__name__}: {e}"), file=out)
        return None
    return url.split("://", 1)[0] + "://…" if "@" in url else url


def finish(output: str, collector: CostCollector, *, summary_cell: bool) -> None:
    """The saved notebook's summary (with where a budget stopped it) and summary cell."""
    import nbformat

    nb = nbformat.read(output, as_version=4)  # type: ignore[no-untyped-call]
    collector.finish(nb, summary_cell=summary_cell)
    nbformat.write(nb, output)  # type: ignore[no-untyped-call]


def stop_machine(command: str | None, out: TextIO) -> bool:
    """The machine stopped through the same path as a budget's ``stop-instance``."""
    import shlex

    from ..cloud.detect import DetectSettings, Endpoints, detect
    from ..cloud.stop import StopSettings, stop_instance

    environ = dict(os.environ)
    endpoints = Endpoints.from_environ(environ, azure_imds="")
    argv = tuple(shlex.split(command)) if command else ()
    machine = None if argv else detect(DetectSettings(endpoints=endpoints), environ)
    result = stop_instance(machine, StopSettings(command=argv), endpoints, environ)
    text = _("gpucost: stopping this machine: {message}")
    print(text.format(message=result.message), file=out)
    return result.ok
