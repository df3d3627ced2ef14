"""``%gpucost auto on``: every cell priced with the light method, shown as a badge.

The light method reads two clocks before and after the cell and, once the notebook has
started CUDA itself, records a CUDA event on each GPU's current stream (the cell's GPU
*span*, sent as ``gpu_span_s``: idle gaps included, so not busy time) and resets the
peak-memory counter; it never starts a profiler, never imports torch and never waits for
the GPU on the cell's thread (the end events are waited for in the thread that sends the
record). The record goes to the server, and JupyterLab shows it next to the cell; it also travels in
the cell's execute reply (:mod:`.cell.saved`), from which the front end or a headless runner
writes the cell's metadata. Nothing is added to the cell's outputs: a front end without the
extension shows the cell as it would without it (``%gpucost`` shows the kernel's tally).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeAlias

from ..core.billing import cost_micro
from ..core.i18n import _
from ..core.money import rate as money_rate
from ..core.money import round_micro, status_bar, to_units
from ..core.wording import cell_seconds
from .cell.cuda import CudaEvent, peak_allocated_bytes, torch_cuda
from .cell.measure import prices, start_events
from .cell.saved import hand_over, in_a_kernel, saved_cell
from .link import kernel_id, link, notebook_path

#: IPython's ``InteractiveShell``: the extension keeps its own attributes on it
#: (``gpucost_timer``, ``gpucost_auto``, ``gpucost_tally``), which its class does not declare
Shell: TypeAlias = Any


def iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat()


def status_of(result: object) -> str:
    """How a cell ended, from IPython's ``ExecutionResult``: ok, error or interrupted."""
    error = getattr(result, "error_in_exec", None)
    if isinstance(error, KeyboardInterrupt):
        return "interrupted"
    return "error" if error is not None else "ok"


def cell_id_of(result_or_info: object) -> str | None:
    """The notebook's id of the cell, from IPython's ``ExecutionResult`` or ``ExecutionInfo``."""
    info = getattr(result_or_info, "info", result_or_info)
    value = getattr(info, "cell_id", None)
    return str(value) if value else None


def cell_record(
    *,
    cell_id: str,
    started_epoch_s: float,
    wall_s: float,
    cpu_s: float,
    cost_micro: int,
    rate_per_hour: Decimal,
    status: str,
    mode: str,
    kernel: str | None,
) -> dict[str, object]:
    """A cell's record as the server takes it (``POST /gpucost/api/cells``), without the
    GPU fields, which the caller adds when it measured them."""
    return {
        "cell_id": cell_id,
        "notebook_path": notebook_path(),
        "kernel_id": kernel,
        "started": iso(started_epoch_s),
        "ended": iso(started_epoch_s + wall_s),
        "wall_s": round(wall_s, 6),
        "cpu_s": round(cpu_s, 6),
        "cost_usd": cost_micro / 1_000_000,
        "rate_usd_per_hour": float(rate_per_hour),
        "status": status,
        "mode": mode,
    }


class Tally:
    """Every cell this kernel priced, by either mode: what the badges and the panel show."""

    def __init__(self) -> None:
        self.cells: dict[str, int] = {"auto": 0, "magic": 0}
        #: what the cells cost, by mode, in micro-units of the session's currency
        self.micro: dict[str, int] = {"auto": 0, "magic": 0}

    def add(self, mode: str, micro: int) -> None:
        self.cells[mode] = self.cells.get(mode, 0) + 1
        self.micro[mode] = self.micro.get(mode, 0) + micro

    @property
    def total_cells(self) -> int:
        return sum(self.cells.values())

    @property
    def total_micro(self) -> int:
        return sum(self.micro.values())


def tally_of(shell: Shell) -> Tally:
    """The kernel's tally of priced cells (made on first use)."""
    tally = getattr(shell, "gpucost_tally", None)
    if not isinstance(tally, Tally):
        tally = Tally()
        shell.gpucost_tally = tally
    return tally


class AutoPricer:
    """Auto mode: IPython's run hooks price every cell that is not a ``%%gpucost`` cell."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.enabled = False
        self.cells = 0
        self.total_micro = 0
        self.last: dict[str, Any] | None = None
        self._started: tuple[float, float, float, dict[int, CudaEvent]] | None = None
        self._kernel_id = kernel_id()

    def enable(self) -> None:
        if not self.enabled:
            self.shell.events.register("pre_run_cell", self.pre_run_cell)
            self.shell.events.register("post_run_cell", self.post_run_cell)
            self.enabled = True

    def disable(self) -> None:
        if self.enabled:
            self.shell.events.unregister("pre_run_cell", self.pre_run_cell)
            self.shell.events.unregister("post_run_cell", self.post_run_cell)
            self.enabled = False
            self._started = None

    def pre_run_cell(self, info: object) -> None:
        raw = getattr(info, "raw_cell", "") or ""
        if raw.lstrip().startswith("%%gpucost"):
            self._started = None  # the cell magic reports this cell itself
            return
        torch = torch_cuda()
        events = start_events(torch) if torch is not None else {}
        self._started = (time.time(), time.perf_counter(), time.process_time(), events)

    def post_run_cell(self, result: object) -> None:
        if self._started is None:
            return
        epoch0, wall0, cpu0, starts = self._started
        wall_s = time.perf_counter() - wall0
        cpu_s = time.process_time() - cpu0
        self._started = None
        p = prices()
        rate = p.rate_per_hour()
        micro = round_micro(cost_micro(rate, round(wall_s * 1_000_000)))
        status = status_of(result)
        record = cell_record(
            cell_id=cell_id_of(result) or f"cell-{self.cells + 1}",
            started_epoch_s=epoch0,
            wall_s=wall_s,
            cpu_s=cpu_s,
            cost_micro=micro,
            rate_per_hour=rate,
            status=status,
            mode="auto",
            kernel=self._kernel_id,
        )
        finish: Callable[[dict[str, Any]], None] | None = None
        torch = torch_cuda()
        if torch is not None and starts:
            ends: dict[int, tuple[CudaEvent, CudaEvent]] = {}
            peaks: dict[str, float] = {}
            for i, start in starts.items():
                with torch.cuda.device(i):
                    end = torch.cuda.Event(enable_timing=True)
                    end.record()
                    ends[i] = (start, end)
                    peaks[str(i)] = float(peak_allocated_bytes(torch, i))
            record["peak_memory_bytes_by_gpu"] = peaks
            record["peak_memory_bytes"] = int(max(peaks.values(), default=0))

            def finish_gpu_times(r: dict[str, Any]) -> None:
                # in the sending thread: the cell's thread never waits for the GPU. The
                # events give the GPU span (idle gaps included), not the time it computed
                span = {}
                for i, (start, end) in ends.items():
                    end.synchronize()
                    span[str(i)] = round(start.elapsed_time(end) / 1e3, 6)
                r["gpu_span_s"] = span

            finish = finish_gpu_times

        self.cells += 1
        self.total_micro += micro
        tally_of(self.shell).add("auto", micro)
        self.last = record
        saved = saved_cell(
            p,
            cost_micro=micro,
            wall_s=wall_s,
            started_epoch_s=epoch0,
            mode="auto",
            status=status,
        )
        server = link()
        if server is not None:
            server.send_cell(record, finish)
        hand_over(saved)
        if server is None and not in_a_kernel():
            # a terminal IPython: no notebook, no badge; the line is all there is
            symbol = p.currency_symbol
            text = _(
                "gpucost: {cost} · {seconds} at {rate} (no jupyter-gpucost server: catalog prices)"
            )
            cost = status_bar(to_units(micro), symbol)
            line = text.format(
                cost=cost, seconds=cell_seconds(wall_s), rate=money_rate(rate, symbol)
            )
            if p.simulated:
                line += _(" (simulated GPUs)")
            for note in p.bound_notes():
                line += f"\n  {note}"
            print(line)
