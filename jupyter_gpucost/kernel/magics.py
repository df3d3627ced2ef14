"""``%%gpucost``: what one cell cost.

The cell magic is implemented with IPython's input transformers and run hooks, not by
re-running the cell body from inside a magic: the first line ``%%gpucost ARGS`` is
replaced (one line for one line, so tracebacks keep their line numbers) by a call that
starts the measurement, the body runs as the cell itself — top-level ``await`` included —
and the ``post_run_cell`` hook ends the measurement and shows the report, whether the cell
finished, raised, or was interrupted (the exception is shown by IPython as usual).
"""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from ..core.currency import for_reader
from ..core.i18n import _, current_language
from ..core.money import budget as budget_text
from ..core.money import exact, rate, rate_amount, status_bar, to_units
from ..core.protocol import binding_standing
from ..core.wording import budget_kind, per_scope
from .auto import Shell, cell_id_of, cell_record, status_of, tally_of
from .cell.measure import CellCost, Measurement, prices
from .cell.saved import hand_over, in_a_kernel, saved_cell
from .commands.allowance import allowance_lines
from .commands.usage import HELP_WORDS, SUBCOMMANDS, MagicParser, docstring, help_text, usage_of
from .link import LinkError, follow_server_language, link
from .stop_when_done import stop_when_done

if TYPE_CHECKING:
    from .commands.fit import GpuMemory

USAGE = usage_of("%%gpucost")

_Method = TypeVar("_Method", bound=Callable[..., object])


def _named_line_magic(name: str) -> Callable[[_Method], _Method]:
    """IPython's ``@line_magic(name)``; its annotations cover the bare and the named
    form in one union, so the named form is spelled out here."""
    return cast("Callable[[_Method], _Method]", line_magic(name))


def _cell_parser() -> MagicParser:
    parser = MagicParser("%%gpucost", USAGE)
    parser.add_argument("--ops", action="store_true")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("-o", "--output", default=None)
    return parser


#: built once: building a parser looks up argparse's own translations on disk each time
#: (a quarter of a millisecond, on every measured cell)
_CELL_PARSER = _cell_parser()


def parse(line: str) -> argparse.Namespace:
    try:
        args = _CELL_PARSER.parse_args(shlex.split(line))
    except ValueError as e:
        raise UsageError(f"{e}\nusage: {USAGE}") from None
    if args.top < 1:
        raise UsageError(f"--top must be at least 1\nusage: {USAGE}")
    if args.output is not None and not args.output.isidentifier():
        raise UsageError(f"-o needs a Python name, not {args.output!r}\nusage: {USAGE}")
    return args


class CellTimer:
    """Holds the measurement of the running cell between the two hooks."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.current: tuple[Measurement, argparse.Namespace] | None = None
        self.last: CellCost | None = None

    def begin(self, line: str) -> None:
        args = parse(line)
        measurement = Measurement(ops=args.ops, top=args.top)
        self.current = (measurement, args)
        measurement.start()

    def post_run_cell(self, result: object) -> None:
        if self.current is None:
            return
        measurement, args = self.current
        self.current = None
        report = measurement.finish(status_of(result))
        self.last = report
        tally_of(self.shell).add("magic", report.cost_micro)
        if args.output:
            self.shell.user_ns[args.output] = report
        display(report)  # type: ignore[no-untyped-call]
        p = prices()
        saved = saved_cell(
            p,
            cost_micro=report.cost_micro,
            wall_s=report.wall_s,
            started_epoch_s=time.time() - report.wall_s,
            mode="magic",
            status=report.status,
            gpu_busy_s=report.gpu_busy_s or None,
        )
        hand_over(saved)
        server = link()
        if server is not None:
            server.send_cell(magic_record(report, result))

    def transform(self, lines: list[str]) -> list[str]:
        """``%%gpucost ARGS`` on the first line becomes a call that starts measuring."""
        if not lines or not lines[0].lstrip().startswith("%%gpucost"):
            return lines
        first = lines[0].strip()
        if first != "%%gpucost" and not first.startswith("%%gpucost "):
            return lines
        args = first[len("%%gpucost") :].strip()
        call = f"get_ipython().gpucost_timer.begin({args!r})\n"
        return [call, *lines[1:]]


def magic_record(report: CellCost, result: object) -> dict[str, object]:
    """The server's record of a ``%%gpucost`` cell (the panel's history, the badge)."""
    from .link import kernel_id

    peaks = {str(i): float(b) for i, b in report.peak_memory_bytes.items()}
    record = cell_record(
        cell_id=cell_id_of(result) or "gpucost-cell",
        started_epoch_s=time.time() - report.wall_s,
        wall_s=report.wall_s,
        cpu_s=report.cpu_s,
        cost_micro=report.cost_micro,
        rate_per_hour=report.rate_per_hour,
        status=report.status,
        mode="magic",
        kernel=kernel_id(),
    )
    record.update(
        # busy time only where it was measured; the events' span is not GPU time
        gpu_busy_s={str(i): round(s, 6) for i, s in report.gpu_busy_s.items()} or None,
        gpu_busy_by=report.gpu_busy_by or None,
        gpu_span_s={str(i): round(s, 6) for i, s in report.gpu_span_s.items()} or None,
        peak_memory_bytes=int(max(peaks.values())) if peaks else None,
        peak_memory_bytes_by_gpu=peaks or None,
        energy_j=round(sum(report.energy_j.values()), 3) if report.energy_j else None,
    )
    return record


@magics_class
class GpuCostMagics(Magics):
    @cell_magic
    def gpucost(self, line: str, cell: str) -> None:
        """Run the cell and show what it cost: %%gpucost [--ops] [--top N] [-o NAME].

        (Cells starting with %%gpucost are rewritten before they run; this entry point
        serves explicit run_cell_magic calls.)
        """
        timer: CellTimer = self.shell.gpucost_timer  # type: ignore[union-attr]
        timer.begin(line)
        result = self.shell.run_cell(cell, store_history=False)  # type: ignore[union-attr]
        del result  # post_run_cell has reported
        return None

    @_named_line_magic("gpucost")
    def gpucost_line(self, line: str) -> None:
        # the docstring (what %gpucost? shows) is every form: set below the class
        words = shlex_split(line)
        if not words:
            show_summary(self.shell)
        elif words[0] in HELP_WORDS:
            print(help_text())
        elif words[0] in SUBCOMMANDS and words[1:] in (["--help"], ["-h"]):
            print(help_text(words[0]))
        elif words[0] == "check":
            if len(words) > 1:
                raise UsageError(f"%gpucost check takes no options\nusage: {LINE_USAGE}")
            from .commands.check import run

            print(run())
        elif words[0] == "fit":
            fit(words[1:])
        elif words[0] == "auto":
            auto(self.shell, words[1:])
        elif words[0] == "budget":
            from .commands.budget import budget

            budget(words[1:])
        elif words[0] == "stop-when-done":
            stop_when_done(self.shell, words[1:])
        elif words[0] == "on-interrupt":
            from .commands.on_interrupt import on_interrupt

            print(on_interrupt(line.strip()[len("on-interrupt") :]))
        else:
            raise UsageError(
                f"unknown subcommand {words[0]!r} (use %%gpucost on a cell to price it)\n"
                f"usage: {LINE_USAGE}"
            )


GpuCostMagics.gpucost_line.__doc__ = docstring()

LINE_USAGE = usage_of()
#: what a wrong ``%gpucost auto X`` is told: the form that changes it
AUTO_USAGE = "%gpucost auto on|off"


def auto(shell: Shell, words: list[str]) -> None:
    from .auto import AutoPricer

    pricer = getattr(shell, "gpucost_auto", None)
    if not words:  # the state, never a change
        on = pricer is not None and pricer.enabled
        print(
            _("gpucost: every cell is priced (%gpucost auto off stops).")
            if on
            else _("gpucost: cells are not priced one by one (%gpucost auto on starts).")
        )
        return
    if len(words) != 1 or words[0] not in ("on", "off"):
        raise UsageError(f"usage: {AUTO_USAGE}")
    if pricer is None:
        pricer = shell.gpucost_auto = AutoPricer(shell)
    if words[0] == "on":
        pricer.enable()
        server = link()
        if server is not None:
            where = _("shown next to each cell")
        elif in_a_kernel():
            # nothing is added under the cells: the record travels in each reply
            where = _(
                "saved in each cell's metadata by jupyter-gpucost's runners; %gpucost shows "
                "the total (no jupyter-gpucost server for this kernel)"
            )
        else:
            where = _("printed under each cell (no jupyter-gpucost server for this kernel)")
        text = _("gpucost: every cell is priced from now on, {where}. %gpucost auto off stops.")
        print(text.format(where=where))
    else:
        pricer.disable()
        print(_("gpucost: cells are no longer priced."))


def show_summary(shell: Shell) -> None:
    """The session's cost from the server, this kernel's cells, and the prices."""
    server = link()
    symbol = prices().currency_symbol
    if server is not None:
        try:
            status = server.status()
        except LinkError as e:
            print(f"gpucost: {e}")
        else:
            symbol = for_reader(
                str(status.get("currency") or ""),
                status.get("currency_symbol") or symbol,
                current_language(),
            )
            elapsed = float(status.get("elapsed_s") or 0)
            telemetry = status.get("telemetry") or {}
            simulated = _(" (simulated GPUs)") if telemetry.get("simulated") else ""
            text = _(
                "gpucost: this session has cost {cost} in {hours} h {minutes} min, now "
                "{rate}/h{simulated}"
            )
            print(
                text.format(
                    cost=status_bar(status["cost_usd"], symbol),
                    hours=int(elapsed // 3600),
                    minutes=f"{int(elapsed % 3600 // 60):02d}",
                    rate=rate_amount(status["rate_usd_per_hour"], symbol),
                    simulated=simulated,
                )
            )
            state = status.get("budget") or {}
            binding = binding_standing(state)
            if binding:
                spent = binding.get("spent_usd")
                text = _("  budget: {spent} of {budget} ({kind})")
                print(
                    text.format(
                        spent=_("unknown") if spent is None else status_bar(spent, symbol),
                        budget=per_scope(
                            budget_text(binding["amount_usd"], symbol), str(binding["scope"])
                        ),
                        kind=budget_kind(str(binding["kind"])),
                    )
                )
            # the hub's allowances: what is left, read-only
            for line in allowance_lines(state, symbol):
                print(line)
    tally = getattr(shell, "gpucost_tally", None)
    if tally is not None and tally.total_cells:
        pricer = getattr(shell, "gpucost_auto", None)
        auto_off = pricer is not None and not pricer.enabled
        text = _(
            "  cells priced in this kernel: {n} ({auto} by auto mode, {magic} by %%gpucost), "
            "{cost} in all"
        )
        total = status_bar(to_units(tally.total_micro), symbol)
        print(
            text.format(
                n=tally.total_cells,
                auto=tally.cells["auto"],
                magic=tally.cells["magic"],
                cost=total,
            )
            + (_(" (auto is off)") if auto_off else "")
        )
    show_prices()


FIT_USAGE = usage_of("fit")


def shlex_split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as e:
        raise UsageError(f"{e}\nusage: {LINE_USAGE}") from None


def show_prices() -> None:
    p = prices()
    text = _("jupyter-gpucost: cells are priced at {rate} ({source})")
    print(text.format(rate=rate(p.rate_per_hour(), p.currency_symbol), source=p.source))
    for uuid, (name, price) in p.gpus.items():
        # a price someone set: every micro-unit it has
        exact_price = None if price is None else exact(price, p.currency_symbol)
        shown = _("no price") if exact_price is None else _("{price}/h").format(price=exact_price)
        bound = p.bound_reason(uuid)
        if bound:
            shown += " " + _("(upper bound: {reason})").format(reason=bound)
        print(f"  {name} ({uuid}): {shown}")
    if p.simulated and p.gpus:
        by = f" ({p.simulated_by})" if p.simulated_by else ""
        text = (
            _(
                "  these GPUs are simulated by the server{by}: not real GPUs; the cost is "
                "what they would cost"
            )
            if p.from_server
            else _(
                "  these GPUs are simulated by this kernel{by} (no jupyter-gpucost server): "
                "not real GPUs; the cost is what they would cost"
            )
        )
        print(text.format(by=by))


def fit(words: list[str]) -> None:
    from .commands import fit as estimator

    parser = MagicParser("%gpucost fit", FIT_USAGE)
    parser.add_argument("size")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--finetune", action="store_true")
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--seq", type=int, default=None)
    args = parser.parse_args(words)
    try:
        params = estimator.parse_size(args.size)
        est = estimator.estimate(
            params,
            args.dtype,
            finetune=args.finetune,
            lora=args.lora,
            batch=args.batch,
            seq=args.seq,
        )
    except ValueError as e:
        raise UsageError(f"{e}\nusage: {FIT_USAGE}") from None
    gpus, how = gpu_memory()
    print(estimator.report(est, gpus, how, estimator.catalog_options(est.total_bytes)))


def gpu_memory() -> tuple[list[GpuMemory], str]:
    """The GPUs here and their memory: torch's view once CUDA is up, else NVML's.

    ``torch.cuda.mem_get_info`` is only asked when the notebook already initialised CUDA:
    asking it first would create a CUDA context (hundreds of MB) on every GPU.
    """
    from .cell.cuda import torch_cuda
    from .cell.measure import nvml
    from .commands.fit import GpuMemory

    torch = torch_cuda()
    if torch is not None:
        gpus = []
        for i in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(i)
            gpus.append(GpuMemory(torch.cuda.get_device_name(i), int(total), int(free)))
        return gpus, "torch.cuda.mem_get_info"
    source = nvml().source
    if source is None:
        return [], nvml().reason or "NVML is not available"
    gpus = []
    for r in source.read():
        if r.memory_total_bytes is None:
            continue
        free = None if r.memory_used_bytes is None else r.memory_total_bytes - r.memory_used_bytes
        gpus.append(GpuMemory(r.name, r.memory_total_bytes, free))
    return gpus, "NVML"


def load(shell: Shell) -> None:
    if getattr(shell, "gpucost_timer", None) is not None:
        return
    follow_server_language()
    timer = CellTimer(shell)
    shell.gpucost_timer = timer
    shell.input_transformers_cleanup.insert(0, timer.transform)
    shell.events.register("post_run_cell", timer.post_run_cell)
    shell.register_magics(GpuCostMagics)


def unload(shell: Shell) -> None:
    timer = getattr(shell, "gpucost_timer", None)
    if timer is None:
        return
    if timer.transform in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(timer.transform)
    shell.events.unregister("post_run_cell", timer.post_run_cell)
    shell.gpucost_timer = None
    pricer = getattr(shell, "gpucost_auto", None)
    if pricer is not None:
        pricer.disable()
    from .cell.measure import stop_energy_reader

    stop_energy_reader()
