"""``jupyter gpucost run NOTEBOOK``: a headless run, priced, within a budget.

papermill runs the notebook (its parameters, its saving of the output notebook after each
cell; nbclient underneath) with the ``gpucost`` engine: every cell priced by the kernel,
its cost saved in its metadata, the total in the notebook's. The runner meters the run
itself (:mod:`.budget`: the machine's rate × the run's wall time, whatever the notebook
publishes); with ``--budget`` a watcher stops the kernel so that the stop lands at the
budget (interrupt, shutdown, then the kill at the budget, the notebook saved before each;
the steps start early enough at the run's rate, and the runner says when and why); the
run's last line says what it cost against the budget; the partial notebook is saved
with each cell that ran, and a note where it stopped. Exit codes (:data:`EXIT_CODES`) say
how the run ended.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NoReturn, TextIO

from ..core.budget_words import about, shortened
from ..core.currency import for_reader
from ..core.i18n import _, current_language, ngettext
from ..core.money import notice, rate, status_bar, to_units
from ..core.saved_cost import (
    ENV_DETECT,
    ENV_TELEMETRY,
    ENV_TRACE,
    METADATA_KEY,
    TELEMETRY_CHOICES,
    NotebookSummary,
    SavedCell,
)
from .budget import BudgetWatch, Deadlines, RunMeter, StopPlan, run_cost_micro
from .collect import BudgetSpent, CostCollector
from .prices import Priced, runner_prices

EXIT_OK = 0
EXIT_CELL_ERROR = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3
EXIT_REFUSED = 4
EXIT_STOP_FAILED = 5
EXIT_LEDGER = 6
#: documented in docs/headless.md
EXIT_CODES = {
    EXIT_OK: "the notebook ran to the end",
    EXIT_CELL_ERROR: "a cell raised an error: the run stopped there (notebook saved)",
    EXIT_USAGE: "the command line is wrong",
    EXIT_BUDGET: "the budget ran out: the run was stopped at it (notebook saved)",
    EXIT_REFUSED: "the run was refused: a budget cannot be enforced (no price here)",
    EXIT_STOP_FAILED: "the run ended but the machine could not be stopped",
    EXIT_LEDGER: "the run could not be added to the ledger: kept for the next run",
}


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
    p.add_argument(
        "--budget", help=_("stop when the run has cost this much (in the session's currency)")
    )
    p.add_argument(
        "--stop-grace",
        type=float,
        default=Deadlines().interrupt_s,
        metavar="SECONDS",
        help=_(
            "how long each step of a budget's stop (interrupt, then shutdown) may take "
            "before the next; the steps start that much before the budget at the run's "
            "rate, so the kill lands at the budget (default %(default)s)"
        ),
    )
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
    """The budget in micro-units of the session's currency; a usage error for anything but
    a positive amount."""
    if text is None:
        return None
    try:
        amount = Decimal(text)
    except InvalidOperation:
        amount = Decimal(-1)
    if not amount.is_finite() or amount <= 0 or amount > Decimal(10**9):
        parser().error(_("--budget must be a positive amount, not {text!r}").format(text=text))
    return int((amount * 1_000_000).to_integral_value())


class Progress:
    """One line per cell on the terminal: a bar of the budget, the cost so far."""

    def __init__(
        self, total_cells: int, budget_micro: int | None, out: TextIO, symbol: str
    ) -> None:
        self.total_cells = total_cells
        #: written before every amount: the session's currency's
        self.symbol = symbol
        self.budget = budget_micro
        self.out = out
        #: the running notebook's own count (papermill adds a parameters cell)
        self.count: Callable[[], int | None] = lambda: None
        #: the run's cost so far as the runner meters it (else the cells')
        self.spent: Callable[[], int | None] = lambda: None

    def __call__(self, index: int, cell: SavedCell | None, summary: NotebookSummary) -> None:
        cost = "-" if cell is None else status_bar(to_units(cell.cost_micro_usd), self.symbol)
        spent = self.spent()
        spent = summary.total_micro_usd if spent is None else spent
        total = status_bar(to_units(spent), self.symbol)
        line = _("cell {i}/{n}: {cost}, {total} so far").format(
            i=index + 1, n=self.count() or self.total_cells, cost=cost, total=total
        )
        if self.budget:
            used = min(spent / self.budget, 1.0)
            filled = round(used * 20)
            bar = "#" * filled + "." * (20 - filled)
            line += f" [{bar}] " + _("{percent} of the {budget} budget").format(
                percent=f"{used:.0%}", budget=status_bar(to_units(self.budget), self.symbol)
            )
        print(line, file=self.out, flush=True)


def shown_symbol(priced: Priced) -> str:
    """The symbol written before the run's amounts: its session's (the kernel's prices), as
    a reader of the terminal's language knows it (``¥`` for yuan in Chinese)."""
    return for_reader(priced.currency, priced.currency_symbol, current_language())


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
    if budget is not None and (priced.unpriced or priced.rate_per_hour <= 0):
        what = ", ".join(priced.unpriced) or _("no GPU and no instance price here")
        text = _("gpucost: a budget cannot be enforced: {what} (no price). Nothing was run.")
        print(text.format(what=what), file=out)
        return EXIT_REFUSED
    url = ledger_url(args.ledger)
    if url:
        write_pending_runs(url, out)
    code = run_notebook(args, budget, priced, url, out)
    if args.stop_instance_when_done and not stop_machine(args.stop_command, out):
        return code if code != EXIT_OK else EXIT_STOP_FAILED
    return code


def run_notebook(
    args: argparse.Namespace, budget: int | None, priced: Priced, url: str | None, out: TextIO
) -> int:
    import nbformat
    import papermill
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    from .papermill_engine import COLLECTOR_KW

    output = args.output or default_output(args.notebook)
    source = nbformat.read(args.notebook, as_version=4)  # type: ignore[no-untyped-call]
    cells = len(source.cells)
    # papermill needs a kernel: the notebook's, else Python's
    kernel = args.kernel or (None if source.metadata.get("kernelspec") else "python3")
    symbol = shown_symbol(priced)
    progress = None if args.quiet else Progress(cells, budget, out, symbol)
    collector = CostCollector(
        runner="jupyter gpucost run",
        summary_cell=not args.no_summary,
        budget_micro=budget,
        rate_per_hour=priced.rate_per_hour,
        currency=priced.currency,
        on_cell=progress,
    )
    meter = RunMeter(priced.rate_per_hour)
    collector.on_start, collector.on_end = meter.start, meter.lap
    if progress is not None:
        progress.count = collector.cell_count
        progress.spent = lambda: run_cost_micro(collector, meter)

    def save(step: str) -> None:
        """The notebook as it stands, saved before each step of a budget's stop."""
        stopped_at(collector, step)
        collector.summary.metered = metered(collector, meter, priced)
        nb_man = collector.notebook_manager()
        if nb_man is not None:
            nb_man.nb.setdefault("metadata", {})[METADATA_KEY] = collector.summary.to_json()
            nb_man.save()

    grace = max(0.5, min(float(args.stop_grace), 3600.0))
    deadlines = Deadlines(interrupt_s=grace, shutdown_s=grace)
    watch = (
        BudgetWatch(
            collector, meter, budget, save, deadlines, lambda p: say_plan(p, budget, out, symbol)
        )
        if budget
        else None
    )
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
    except (PapermillExecutionError, DeadKernelError):
        code = EXIT_BUDGET if watch is not None and watch.fired else EXIT_CELL_ERROR
    finally:
        if watch is not None:
            watch.stop()
        # a cell the kernel never ended (it died) ran until now
        meter.stop(at_last_lap=collector.running is None)
    if code == EXIT_BUDGET:
        stopped_at(collector, watch.steps[-1] if watch is not None and watch.steps else "")
    collector.summary.metered = metered(collector, meter, priced)
    finish(output, collector, summary_cell=not args.no_summary)
    spent = run_cost_micro(collector, meter)
    say_cost(code == EXIT_BUDGET, collector, spent, budget, output, out, symbol)
    if url is None:
        return code
    entry = run_entry(collector, meter, priced, args.notebook)
    if not record_in_ledger(url, entry, out, symbol):
        return code if code != EXIT_OK else EXIT_LEDGER
    return code


def say_cost(
    stopped: bool,
    collector: CostCollector,
    spent: int,
    budget: int | None,
    output: str,
    out: TextIO,
    symbol: str,
) -> None:
    """The run's last lines: what it cost (and, ``stopped``, the budget it stopped at),
    where it was saved, and the share of its budget."""
    total = status_bar(to_units(spent), symbol)
    if stopped:
        text = _(
            "gpucost: stopped at the {budget} budget after cell {i}: {total} spent. Saved: {path}"
        )
        print(
            text.format(
                budget=status_bar(to_units(budget or 0), symbol),
                i=int((collector.summary.stopped or {}).get("cell", 0)) + 1,
                total=total,
                path=output,
            ),
            file=out,
        )
    else:
        text = _("gpucost: the run cost {total} ({n} cells priced). Saved: {path}")
        print(text.format(total=total, n=collector.summary.cells, path=output), file=out)
    if budget:
        text = _("gpucost: the run cost {total} of its {budget} budget ({percent}).")
        print(
            text.format(
                total=status_bar(to_units(spent), symbol),
                budget=notice(budget, symbol),
                percent=f"{spent / budget:.1%}",
            ),
            file=out,
        )


def say_plan(plan: StopPlan, budget: int, out: TextIO, symbol: str) -> None:
    """When the budget's stop lands, said as its steps begin (the watcher's thread)."""
    per_hour = rate(plan.rate_per_hour, symbol)
    text = _(
        "gpucost: stops at {amount} — in about {duration} at {rate}; the notebook saved "
        "first, then the kernel interrupted, shut down, and killed at the budget."
    ).format(amount=notice(budget, symbol), duration=about(plan.countdown_s), rate=per_hour)
    if plan.shortened is not None:
        text += " " + shortened(plan.shortened, plan.grace_s, plan.countdown_s, per_hour)
    print(text, file=out, flush=True)


def stopped_at(collector: CostCollector, step: str) -> None:
    """The summary's note of where the budget stopped the run, and how."""
    # the cell that was running when the budget ran out (a killed kernel never ended it),
    # else the last that ended
    index = collector.running if collector.running is not None else collector.last_executed or 0
    note = _(
        "gpucost: the run was stopped at cell {i}: its budget was spent; the cells after "
        "it did not run."
    ).format(i=index + 1)
    cell_id = collector.last_cell_id
    nb = getattr(collector.notebook_manager(), "nb", None)
    if nb is not None and 0 <= index < len(nb.cells):
        cell_id = nb.cells[index].get("id")
    collector.summary.stopped = {"cell": index, "cell_id": cell_id, "note": note, "by": step}


def metered(collector: CostCollector, meter: RunMeter, priced: Priced) -> dict[str, object]:
    """What the runner metered: the run's cost (never below its cells'), its wall time and
    rate, and how much of it no cell's record holds."""
    spent = run_cost_micro(collector, meter)
    return {
        "cost_micro_usd": spent,
        "cost_usd": str(Decimal(spent) / 1_000_000),
        "wall_s": round(meter.wall_s(), 3),
        "rate_usd_per_hour": str(priced.rate_per_hour),
        "unattributed_micro_usd": spent - collector.summary.total_micro_usd,
    }


def run_entry(collector: CostCollector, meter: RunMeter, priced: Priced, notebook: str) -> Any:
    from ..server.ledger import new_session_id
    from .ledger import RunEntry

    ended = datetime.now(UTC)
    started = collector.run_started or ended
    return RunEntry(
        session_id=new_session_id(started),
        notebook_path=notebook,
        started=started,
        ended=ended,
        cost_micro_usd=run_cost_micro(collector, meter),
        rate_usd_per_hour=priced.rate_per_hour,
        cells=tuple(collector.priced),
        user=os.environ.get("JUPYTERHUB_USER") or None,
    )


def ledger_url(choice: str | None) -> str | None:
    """The ledger a run is added to: the one named, else this machine's (``None``: none)."""
    from .ledger import default_ledger_url

    return default_ledger_url() if choice is None else None if choice == "none" else choice


def write_pending_runs(url: str, out: TextIO) -> None:
    """The runs an earlier start could not add to this ledger, added now."""
    from .ledger import shown_url, write_pending

    written, errors = write_pending(url)
    if written:
        text = ngettext(
            "gpucost: {n} earlier run added to the ledger {url}",
            "gpucost: {n} earlier runs added to the ledger {url}",
            written,
        )
        print(text.format(n=written, url=shown_url(url)), file=out)
    for error in errors:
        text = _("gpucost: an earlier run is still not in the ledger (kept for the next run): {e}")
        print(text.format(e=error), file=out)


def record_in_ledger(url: str, entry: Any, out: TextIO, symbol: str) -> bool:
    """Add the run to the ledger; a failure is said, and the run kept for the next start."""
    from .ledger import append_run, keep_pending, shown_url

    try:
        append_run(url, entry)
    except Exception as e:  # the run is saved: a ledger that cannot be written is said
        text = _("gpucost: the run could not be added to the ledger: {error}")
        print(text.format(error=f"{type(e).__name__}: {e}"), file=out)
        try:
            path = keep_pending(url, entry)
        except OSError as kept:
            text = _("gpucost: and it could not be kept for the next run: {error}")
            print(text.format(error=kept), file=out)
            return False
        text = _("gpucost: its cost ({total}) is kept in {path} and added at the next run")
        total = status_bar(to_units(entry.cost_micro_usd), symbol)
        print(text.format(total=total, path=path), file=out)
        return False
    print(_("gpucost: added to the ledger {url}").format(url=shown_url(url)), file=out)
    return True


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
