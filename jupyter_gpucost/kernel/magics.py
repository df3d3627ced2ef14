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
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from .measure import Measurement, prices

USAGE = "%%gpucost [--ops] [--top N] [-o NAME | --output NAME]"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}\nusage: {USAGE}")


def parse(line: str) -> argparse.Namespace:
    parser = _Parser(prog="%%gpucost", add_help=False)
    parser.add_argument("--ops", action="store_true")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("-o", "--output", default=None)
    try:
        args = parser.parse_args(shlex.split(line))
    except ValueError as e:
        raise UsageError(f"{e}\nusage: {USAGE}") from None
    if args.top < 1:
        raise UsageError(f"--top must be at least 1\nusage: {USAGE}")
    if args.output is not None and not args.output.isidentifier():
        raise UsageError(f"-o needs a Python name, not {args.output!r}\nusage: {USAGE}")
    return args


class CellTimer:
    """Holds the measurement of the running cell between the two hooks."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.current: tuple[Measurement, argparse.Namespace] | None = None
        self.last: Any = None

    def begin(self, line: str) -> None:
        args = parse(line)
        measurement = Measurement(ops=args.ops, top=args.top)
        self.current = (measurement, args)
        measurement.start()

    def post_run_cell(self, result: Any) -> None:
        if self.current is None:
            return
        measurement, args = self.current
        self.current = None
        error = getattr(result, "error_in_exec", None)
        if isinstance(error, KeyboardInterrupt):
            status = "interrupted"
        elif error is not None:
            status = "error"
        else:
            status = "ok"
        report = measurement.finish(status)
        self.last = report
        if args.output:
            self.shell.user_ns[args.output] = report
        display(report)

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


@magics_class
class GpuCostMagics(Magics):
    @cell_magic
    def gpucost(self, line: str, cell: str) -> Any:
        """Run the cell and show what it cost: %%gpucost [--ops] [--top N] [-o NAME].

        (Cells starting with %%gpucost are rewritten before they run; this entry point
        serves explicit run_cell_magic calls.)
        """
        timer: CellTimer = self.shell.gpucost_timer  # type: ignore[union-attr]
        timer.begin(line)
        result = self.shell.run_cell(cell, store_history=False)  # type: ignore[union-attr]
        del result  # post_run_cell has reported
        return None

    @line_magic("gpucost")
    def gpucost_line(self, line: str) -> None:
        """%gpucost: the prices this kernel uses; %gpucost check; %gpucost fit SIZE ..."""
        words = shlex_split(line)
        if not words:
            show_prices()
        elif words[0] == "check":
            if len(words) > 1:
                raise UsageError(f"%gpucost check takes no options\nusage: {LINE_USAGE}")
            from .check import run

            print(run())
        elif words[0] == "fit":
            fit(words[1:])
        else:
            raise UsageError(
                f"unknown subcommand {words[0]!r} (use %%gpucost on a cell to price it)\n"
                f"usage: {LINE_USAGE}"
            )


LINE_USAGE = (
    "%gpucost | %gpucost check | "
    "%gpucost fit SIZE [--dtype DTYPE] [--finetune] [--lora] [--batch N] [--seq N]"
)
FIT_USAGE = "%gpucost fit SIZE [--dtype DTYPE] [--finetune] [--lora] [--batch N] [--seq N]"


def shlex_split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as e:
        raise UsageError(f"{e}\nusage: {LINE_USAGE}") from None


def show_prices() -> None:
    p = prices()
    print(
        f"jupyter-gpucost: cells are priced at {p.currency_symbol}"
        f"{p.rate_usd_per_hour():.4f}/h ({p.source})"
    )
    for uuid, (name, price) in p.gpus.items():
        shown = "no price" if price is None else f"{p.currency_symbol}{price}/h"
        print(f"  {name} ({uuid}): {shown}")


class _FitParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}\nusage: {FIT_USAGE}")


def fit(words: list[str]) -> None:
    from . import fit as estimator

    parser = _FitParser(prog="%gpucost fit", add_help=False)
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


def gpu_memory() -> tuple[list[Any], str]:
    """The GPUs here and their memory: torch's view once CUDA is up, else NVML's.

    ``torch.cuda.mem_get_info`` is only asked when the notebook already initialised CUDA:
    asking it first would create a CUDA context (hundreds of MB) on every GPU.
    """
    from .fit import GpuMemory
    from .measure import _torch_cuda, nvml

    torch = _torch_cuda()
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


def load(shell: Any) -> None:
    if getattr(shell, "gpucost_timer", None) is not None:
        return
    timer = CellTimer(shell)
    shell.gpucost_timer = timer
    shell.input_transformers_cleanup.insert(0, timer.transform)
    shell.events.register("post_run_cell", timer.post_run_cell)
    shell.register_magics(GpuCostMagics)


def unload(shell: Any) -> None:
    timer = getattr(shell, "gpucost_timer", None)
    if timer is None:
        return
    if timer.transform in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(timer.transform)
    shell.events.unregister("post_run_cell", timer.post_run_cell)
    shell.gpucost_timer = None
