"""Measuring one cell: wall and CPU time, GPU time, peak GPU memory, energy, cost.

Light method (always): wall clock, process CPU time, CUDA events on every GPU's current
stream (when torch is already imported and CUDA is initialised), peak memory from the
caching allocator, and the NVML energy counter of each GPU before and after. With
``ops=True`` the cell also runs under ``torch.profiler`` and the operators with the most
self device time (self CPU time on a CPU-only machine) are listed with their share of the
cell's cost.

torch is never imported here unless the user already has: a cell that does not use torch
is measured without it.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..core.billing import cost_micro_usd
from ..core.money import round_micro, status_bar, to_usd
from .cuda import CudaEvent, Torch, torch_cuda
from .prices import KernelPrices, from_catalog, from_environment

if TYPE_CHECKING:
    from ..telemetry.base import GpuReading
    from ..telemetry.nvml import NvmlSource


@dataclass
class OpCost:
    name: str
    calls: int
    self_time_s: float
    share: float
    cost_micro_usd: int


@dataclass
class CellCost:
    """What one cell cost; shown as a compact report (HTML or text)."""

    status: str = "ok"  # ok | error | interrupted
    wall_s: float = 0.0
    cpu_s: float = 0.0
    #: CUDA device index -> seconds between the cell's start and end events on its stream
    gpu_time_s: dict[int, float] = field(default_factory=dict)
    peak_memory_bytes: dict[int, int] = field(default_factory=dict)
    #: GPU index -> joules drawn during the cell (NVML energy counter delta)
    energy_j: dict[int, float] = field(default_factory=dict)
    gpu_names: list[str] = field(default_factory=list)
    rate_usd_per_hour: Decimal = Decimal(0)
    cost_micro_usd: int = 0
    currency_symbol: str = "$"
    price_source: str = ""
    #: the GPUs priced are the server's simulated ones (a replayed trace), not real GPUs
    simulated: bool = False
    simulated_by: str = ""
    ops: list[OpCost] = field(default_factory=list)
    ops_by: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def cost_usd(self) -> Decimal:
        return Decimal(self.cost_micro_usd) / 1_000_000

    def _money(self, micro: int) -> str:
        return status_bar(to_usd(micro), self.currency_symbol)

    def lines(self) -> list[tuple[str, str]]:
        rows = [
            (
                "cost",
                f"{self._money(self.cost_micro_usd)} at "
                f"{self.currency_symbol}{self.rate_usd_per_hour:.2f}/h",
            ),
            ("wall time", f"{self.wall_s:.3f} s"),
            ("CPU time", f"{self.cpu_s:.3f} s"),
        ]
        for i, seconds in sorted(self.gpu_time_s.items()):
            rows.append((f"GPU {i} time (CUDA events)", f"{seconds:.3f} s"))
        for i, peak in sorted(self.peak_memory_bytes.items()):
            rows.append((f"GPU {i} peak memory", f"{peak / 2**30:.2f} GiB"))
        for i, joules in sorted(self.energy_j.items()):
            rows.append((f"GPU {i} energy", f"{joules:.1f} J"))
        if self.gpu_names and self.simulated:
            by = f" ({self.simulated_by})" if self.simulated_by else ""
            rows.append(
                (
                    "GPUs (simulated)",
                    f"{', '.join(self.gpu_names)}: simulated by the server{by}, not real "
                    "GPUs; the cost is what they would cost",
                )
            )
        elif self.gpu_names:
            rows.append(("GPUs", ", ".join(self.gpu_names)))
        rows.append(("prices", self.price_source))
        return rows

    def __repr__(self) -> str:
        head = "%%gpucost" + ("" if self.status == "ok" else f" ({self.status})")
        out = [head] + [f"  {k}: {v}" for k, v in self.lines()]
        if self.ops:
            out.append(f"  top operators by {self.ops_by}:")
            for op in self.ops:
                out.append(
                    f"    {op.name:<40} {op.self_time_s * 1e3:10.3f} ms "
                    f"{op.share:6.1%} {self._money(op.cost_micro_usd)} ({op.calls} calls)"
                )
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(
            f"<tr><th style='text-align:left;padding-right:1em'>{escape(k)}</th>"
            f"<td>{escape(v)}</td></tr>"
            for k, v in self.lines()
        )
        ops = ""
        if self.ops:
            body = "".join(
                f"<tr><td><code>{escape(o.name)}</code></td><td>{o.calls}</td>"
                f"<td>{o.self_time_s * 1e3:.3f} ms</td><td>{o.share:.1%}</td>"
                f"<td>{escape(self._money(o.cost_micro_usd))}</td></tr>"
                for o in self.ops
            )
            ops = (
                f"<div>Top operators by {escape(self.ops_by)}</div><table>"
                "<tr><th>operator</th><th>calls</th><th>self time</th><th>share</th>"
                f"<th>cost</th></tr>{body}</table>"
            )
        notes = "".join(f"<div><em>{escape(n)}</em></div>" for n in self.notes)
        status = "" if self.status == "ok" else f" ({escape(self.status)})"
        return (
            # the amounts' dollar signs must not be typeset as LaTeX by JupyterLab
            f"<div class='jp-gpucost-cell-report tex2jax_ignore mathjax_ignore'>"
            f"<strong>%%gpucost{status}</strong>"
            f"<table>{rows}</table>{ops}{notes}</div>"
        )


class KernelNvml:
    """The kernel's own view of the GPUs through the server's NVML source (optional)."""

    def __init__(self) -> None:
        self.source: NvmlSource | None = None
        self.reason: str | None = None
        try:
            from ..telemetry.base import SourceUnavailable
            from ..telemetry.nvml import NvmlSource

            source = NvmlSource()
            try:
                source.open()
                self.source = source
            except SourceUnavailable as e:
                self.reason = e.reason
        except Exception as e:  # no pynvml at all
            self.reason = str(e)

    def read(self) -> tuple[GpuReading, ...]:
        return self.source.read() if self.source is not None else ()

    def energy_j(self) -> dict[int, float]:
        return self.source.read_energy_j() if self.source is not None else {}


_nvml: KernelNvml | None = None
_prices: KernelPrices | None = None


def nvml() -> KernelNvml:
    """The kernel's NVML view, opened on first use."""
    global _nvml
    if _nvml is None:
        _nvml = KernelNvml()
    return _nvml


def prices() -> KernelPrices:
    """The prices this kernel uses: the server's (environment), else the catalog's."""
    global _prices
    if _prices is None:
        _prices = from_environment()
        if _prices is None:
            readings = nvml().read()
            _prices = from_catalog([(r.uuid, r.name, r.memory_total_bytes) for r in readings])
    return _prices


#: below this wall time the energy counter's 20-100 ms steps are a large part of the delta
ROUGH_ENERGY_BELOW_S = 1.0


class EnergyRead:
    """One read of the GPUs' energy counters, in a thread of its own.

    NVML's calls release the GIL and can take milliseconds each on a busy driver; the
    counters themselves only move every 20-100 ms, so reading them beside the cell rather
    than before it changes nothing a reader can see, and keeps the read off the cell's time.
    """

    def __init__(self, after: EnergyRead | None = None) -> None:
        self.value: dict[int, float] = {}
        #: a read made ``after`` another begins once that one is done: a thread started
        #: first is not always the first to run, and the counters must be read in order
        self._after = after
        self._thread: threading.Thread | None = None
        if nvml().source is not None:
            self._thread = threading.Thread(target=self._read, name="gpucost-energy", daemon=True)
            self._thread.start()

    def _read(self) -> None:
        if self._after is not None and self._after._thread is not None:
            self._after._thread.join(2.0)
        try:
            self.value = nvml().energy_j()
        except Exception:
            self.value = {}

    def result(self, timeout_s: float = 2.0) -> dict[int, float]:
        if self._thread is not None:
            self._thread.join(timeout_s)
        return dict(self.value)


def start_events(torch: Torch) -> dict[int, CudaEvent]:
    """Reset each GPU's peak memory and record a timing event on its current stream."""
    events: dict[int, CudaEvent] = {}
    for i in range(torch.cuda.device_count()):
        with torch.cuda.device(i):
            torch.cuda.reset_peak_memory_stats(i)
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            events[i] = event
    return events


def profiler_running() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.autograd.profiler._is_profiler_enabled)
    except AttributeError:
        return False


class Measurement:
    """Started before the cell, finished after it (from pre/post run hooks)."""

    def __init__(self, *, ops: bool = False, top: int = 10) -> None:
        self.want_ops = ops
        self.top = top
        self.result = CellCost()
        self._profiler: Any = None
        self._events: dict[int, CudaEvent] = {}

    def start(self) -> None:
        self._energy0 = EnergyRead()
        torch = torch_cuda()
        if torch is not None:
            self._events = start_events(torch)
        if self.want_ops:
            self._start_profiler()
        self._wall0 = time.perf_counter()
        self._cpu0 = time.process_time()

    def _start_profiler(self) -> None:
        r = self.result
        torch: Torch | None = sys.modules.get("torch")
        if torch is None:
            try:  # the user asked for operators: torch is needed now
                torch = importlib.import_module("torch")
            except ImportError:
                r.notes.append("--ops needs PyTorch, which is not installed: skipped.")
                return
        if profiler_running():
            r.notes.append(
                "--ops skipped: a profiler is already running in this kernel (yours); "
                "the light measurements are still taken."
            )
            return
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self._profiler = profile(activities=activities)
        self._profiler.__enter__()

    def finish(self, status: str) -> CellCost:
        r = self.result
        r.wall_s = time.perf_counter() - self._wall0
        r.cpu_s = time.process_time() - self._cpu0
        r.status = status
        torch = torch_cuda()
        if torch is not None:
            for i in range(torch.cuda.device_count()):
                with torch.cuda.device(i):
                    end = torch.cuda.Event(enable_timing=True)
                    end.record()
                    end.synchronize()
                    start = self._events.get(i)
                    if start is not None:
                        r.gpu_time_s[i] = start.elapsed_time(end) / 1e3
                    r.peak_memory_bytes[i] = int(torch.cuda.max_memory_allocated(i))
        # the GPUs are done (synchronised above): the second read starts now and runs
        # beside the rest of the report, the profiler's teardown included
        energy1 = EnergyRead(after=self._energy0)
        profiler, self._profiler = self._profiler, None
        if profiler is not None:
            profiler.__exit__(None, None, None)
        p = prices()
        r.simulated = p.simulated
        r.simulated_by = p.simulated_by
        if nvml().source is None:
            if p.simulated:
                r.notes.append("no GPU energy: the server's GPUs are simulated")
            else:
                r.notes.append(f"no GPU energy: {nvml().reason}")
        r.gpu_names = [name for name, _ in p.gpus.values()]
        r.rate_usd_per_hour = p.rate_usd_per_hour()
        r.currency_symbol = p.currency_symbol
        r.price_source = p.source
        if not p.gpus:
            r.notes.append(
                "no GPU here: the cost is the wall time at the instance's base price "
                "(0 unless the server sets c.GpuCost.base_price_usd_per_hour)"
            )
        unpriced = [name for name, price in p.gpus.values() if price is None]
        if unpriced:
            r.notes.append(f"no price for {', '.join(unpriced)}: not counted")
        # the GPUs are held for the whole cell: wall time at the rate in force
        exact = cost_micro_usd(r.rate_usd_per_hour, round(r.wall_s * 1_000_000))
        r.cost_micro_usd = round_micro(exact)
        if profiler is not None:
            self._ops(profiler, r)
        before_j = self._energy0.result()
        for index, after in energy1.result().items():
            before = before_j.get(index)
            if before is not None and after >= before:
                r.energy_j[index] = after - before
        if r.energy_j and r.wall_s < ROUGH_ENERGY_BELOW_S:
            r.notes.append(
                f"the energy is approximate for a cell under {ROUGH_ENERGY_BELOW_S:.0f} s: "
                "NVML's energy counter moves only every 20-100 ms"
            )
        return r

    def _ops(self, profiler: Any, r: CellCost) -> None:
        events = profiler.key_averages()
        cuda = torch_cuda() is not None

        def device_time(e: Any) -> float:
            for attr in ("self_device_time_total", "self_cuda_time_total"):
                value = getattr(e, attr, None)
                if value is not None:
                    return float(value)
            return 0.0

        if cuda:
            total = sum(device_time(e) for e in events)
            if total <= 0:
                r.notes.append(
                    "the CUDA profile is empty (no kernel ran on the GPU, or CUPTI is not "
                    "available): operators are ranked by self CPU time"
                )
                cuda = False
        key = device_time if cuda else (lambda e: float(e.self_cpu_time_total))
        r.ops_by = "self device time" if cuda else "self CPU time"
        # rank operators, not the GPU kernels and runtime activities they launched (those
        # carry the same device time and would count it twice)
        events = [e for e in events if "CUDA" not in str(getattr(e, "device_type", "CPU"))]
        ranked = sorted(events, key=key, reverse=True)
        total = sum(key(e) for e in events) or 1.0
        for e in ranked[: self.top]:
            share = key(e) / total
            if share <= 0:
                break
            r.ops.append(
                OpCost(
                    name=e.key,
                    calls=int(e.count),
                    self_time_s=key(e) / 1e6,
                    share=share,
                    cost_micro_usd=round(r.cost_micro_usd * share),
                )
            )
