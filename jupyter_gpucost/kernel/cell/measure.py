"""Measuring one cell: wall and CPU time, GPU time, peak GPU memory, energy, cost.

Light method (always): wall clock, process CPU time, CUDA events on every GPU's current
stream (when torch is already imported and CUDA is initialised), peak memory from the
caching allocator, and each GPU's energy from a reader thread (:mod:`.energy`): nothing
on the cell's thread calls NVML. The two CUDA events give the GPU *span* of the cell (from
the first to the last thing it queued, idle gaps included), which is not the time the GPU
computed: a ``time.sleep`` cell has a span as long as its wall time. With ``ops=True`` the
cell also runs under ``torch.profiler``; the operators with the most self device time (self
CPU time on a CPU-only machine) are listed with their share of the cell's cost, and the
kernels the profiler saw give the GPU *busy* time (:mod:`.ops`).

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

from ...core.billing import cost_micro
from ...core.i18n import _
from ...core.money import rate, round_micro, status_bar, to_units
from ..link import LinkError, link
from .cuda import CudaEvent, Torch, peak_allocated_bytes, torch_cuda
from .energy import EnergyReader, Mark
from .ops import ops_table
from .prices import KernelPrices, from_environment, from_published

if TYPE_CHECKING:
    from ...telemetry.base import GpuReading
    from ...telemetry.nvml import NvmlSource


@dataclass
class OpCost:
    name: str
    calls: int
    self_time_s: float
    share: float
    #: in micro-units of the session's currency
    cost_micro: int

    @property
    def cost_micro_usd(self) -> int:
        """Deprecated name of :attr:`cost_micro` (the amount is in the session's currency)."""
        return self.cost_micro


@dataclass
class CellCost:
    """What one cell cost; shown as a compact report (HTML or text)."""

    status: str = "ok"  # ok | error | interrupted
    wall_s: float = 0.0
    cpu_s: float = 0.0
    #: CUDA device index -> seconds between the cell's start and end events on its stream
    #: (the GPU *span*: idle gaps included; not the time the GPU computed)
    gpu_span_s: dict[int, float] = field(default_factory=dict)
    #: CUDA device index -> seconds the GPU computed for the cell, where measured
    gpu_busy_s: dict[int, float] = field(default_factory=dict)
    #: how ``gpu_busy_s`` was measured: "profiler" (``--ops``), else ""
    gpu_busy_by: str = ""
    peak_memory_bytes: dict[int, int] = field(default_factory=dict)
    #: GPU index -> joules drawn during the cell (NVML energy counter delta)
    energy_j: dict[int, float] = field(default_factory=dict)
    gpu_names: list[str] = field(default_factory=list)
    #: the price per hour of the kernel's GPUs and the instance, in the session's currency
    rate_per_hour: Decimal = Decimal(0)
    #: what the cell cost, in micro-units of the session's currency
    cost_micro: int = 0
    currency_symbol: str = "$"
    price_source: str = ""
    #: the GPUs priced are the server's simulated ones (a replayed trace), not real GPUs
    simulated: bool = False
    simulated_by: str = ""
    #: the simulated GPUs are the server's (else the kernel's own, with no server)
    simulated_by_server: bool = True
    ops: list[OpCost] = field(default_factory=list)
    ops_by: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def cost(self) -> Decimal:
        """What the cell cost, in the session's currency."""
        return Decimal(self.cost_micro) / 1_000_000

    @property
    def cost_usd(self) -> Decimal:
        """Deprecated name of :attr:`cost` (the amount is in the session's currency)."""
        return self.cost

    @property
    def cost_micro_usd(self) -> int:
        """Deprecated name of :attr:`cost_micro`."""
        return self.cost_micro

    @property
    def rate_usd_per_hour(self) -> Decimal:
        """Deprecated name of :attr:`rate_per_hour`."""
        return self.rate_per_hour

    def _money(self, micro: int) -> str:
        return status_bar(to_units(micro), self.currency_symbol)

    def lines(self) -> list[tuple[str, str]]:
        per_hour = rate(self.rate_per_hour, self.currency_symbol)
        rows = [
            (
                _("cost"),
                _("{cost} at {rate}").format(cost=self._money(self.cost_micro), rate=per_hour),
            ),
            (_("wall time"), f"{self.wall_s:.3f} s"),
            (_("CPU time"), f"{self.cpu_s:.3f} s"),
        ]
        for i, seconds in sorted(self.gpu_busy_s.items()):
            label = _("GPU {i} busy ({by})").format(i=i, by=self.gpu_busy_by)
            rows.append((label, f"{seconds:.3f} s"))
        for i, seconds in sorted(self.gpu_span_s.items()):
            label = _("GPU {i} span (CUDA events, idle included)").format(i=i)
            rows.append((label, f"{seconds:.3f} s"))
        for i, peak in sorted(self.peak_memory_bytes.items()):
            rows.append((_("GPU {i} peak memory").format(i=i), f"{peak / 2**30:.2f} GiB"))
        for i, joules in sorted(self.energy_j.items()):
            rows.append((_("GPU {i} energy").format(i=i), f"{joules:.1f} J"))
        if self.gpu_names and self.simulated:
            by = f" ({self.simulated_by})" if self.simulated_by else ""
            text = (
                _(
                    "{gpus}: simulated by the server{by}, not real GPUs; the cost is what "
                    "they would cost"
                )
                if self.simulated_by_server
                else _(
                    "{gpus}: simulated by this kernel{by}, not real GPUs; the cost is what "
                    "they would cost"
                )
            )
            gpus = ", ".join(self.gpu_names)
            rows.append((_("GPUs (simulated)"), text.format(gpus=gpus, by=by)))
        elif self.gpu_names:
            rows.append((_("GPUs"), ", ".join(self.gpu_names)))
        rows.append((_("prices"), self.price_source))
        return rows

    def __repr__(self) -> str:
        head = "%%gpucost" + ("" if self.status == "ok" else f" ({self.status})")
        out = [head] + [f"  {k}: {v}" for k, v in self.lines()]
        if self.ops:
            out.append(_("  top operators by {by}:").format(by=self.ops_by))
            for op in self.ops:
                out.append(
                    f"    {op.name:<40} {op.self_time_s * 1e3:10.3f} ms "
                    f"{op.share:6.1%} {self._money(op.cost_micro)} ({op.calls} calls)"
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
                f"<td>{escape(self._money(o.cost_micro))}</td></tr>"
                for o in self.ops
            )
            heads = "".join(
                f"<th>{escape(h)}</th>"
                for h in (_("operator"), _("calls"), _("self time"), _("share"), _("cost"))
            )
            top = _("Top operators by {by}").format(by=self.ops_by)
            ops = f"<div>{escape(top)}</div><table><tr>{heads}</tr>{body}</table>"
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
            from ...telemetry.base import SourceUnavailable
            from ...telemetry.nvml import NvmlSource

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
_nvml_lock = threading.Lock()
_prices: KernelPrices | None = None
#: when the server's prices were last asked for (``time.monotonic``)
_prices_asked_at = 0.0
_prices_lock = threading.Lock()
#: how often a kernel asks its server for the prices in force: a quoted price the server
#: reads again (hourly) reaches the cells within this
PRICES_FRESH_S = 60.0
_energy: EnergyReader | None = None


def nvml() -> KernelNvml:
    """The kernel's NVML view, opened on first use (by whichever thread asks first)."""
    global _nvml
    with _nvml_lock:
        if _nvml is None:
            _nvml = KernelNvml()
        return _nvml


def nvml_reason() -> str | None:
    """Why there is no NVML, once it has been tried (never opens it)."""
    view = _nvml
    return None if view is None or view.source is not None else view.reason


def energy_reader() -> EnergyReader:
    """The kernel's one energy reader (its thread opens NVML and reads the counters)."""
    global _energy
    if _energy is None:
        _energy = EnergyReader(lambda: nvml().energy_j(), absent=lambda: nvml().source is None)
    return _energy


def stop_energy_reader() -> None:
    """End the energy reader's thread (the extension is unloaded)."""
    if _energy is not None:
        _energy.stop()


def prices() -> KernelPrices:
    """The prices this kernel uses: the server's (environment at start, then asked for
    again in the background every ``PRICES_FRESH_S``), else the catalog's."""
    global _prices, _prices_asked_at
    if _prices is None:
        _prices = from_environment()
        _prices_asked_at = time.monotonic()
        if _prices is None:
            from .standalone import kernel_prices

            _prices = kernel_prices(nvml)
    elif _prices.from_server and time.monotonic() - _prices_asked_at >= PRICES_FRESH_S:
        _prices_asked_at = time.monotonic()
        threading.Thread(target=_ask_prices, name="gpucost-prices", daemon=True).start()
    return _prices


def _ask_prices() -> None:
    """The server's prices in force now, for the cells that follow (kept as they were when
    it does not answer)."""
    global _prices
    server = link()
    if server is None or not _prices_lock.acquire(blocking=False):
        return
    try:
        _prices = from_published(server.prices())
    except LinkError:
        pass
    finally:
        _prices_lock.release()


#: below this wall time the energy counter's 100 ms steps are a large part of the delta
ROUGH_ENERGY_BELOW_S = 1.0

#: the first start of torch.profiler in a process (seconds: 6.2 on an H100 machine, 2 on
#: a CPU), which the cell's time leaves out and the report mentions
SLOW_PROFILER_START_S = 0.5


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
        self._energy_mark: Mark | None = None

    def start(self) -> None:
        self._energy_mark = energy_reader().cell_started()
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
        began = time.perf_counter()
        self._profiler.__enter__()
        # the first start in a process loads Kineto (seconds); the cell's time starts
        # after it, and the report says what it took
        took = time.perf_counter() - began
        if took >= SLOW_PROFILER_START_S:
            r.notes.append(
                f"the profiler's first start in this kernel took {took:.1f} s (later ones "
                "take about 1 ms); it is not in the cell's time or cost"
            )

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
                        r.gpu_span_s[i] = start.elapsed_time(end) / 1e3
                    r.peak_memory_bytes[i] = peak_allocated_bytes(torch, i)
        # the GPUs are done (synchronised above): the energy up to now, from the reader's
        # readings (no NVML call here)
        energy = None
        if self._energy_mark is not None:
            energy = energy_reader().cell_ended(self._energy_mark)
            self._energy_mark = None
        profiler, self._profiler = self._profiler, None
        if profiler is not None:
            profiler.__exit__(None, None, None)
        p = prices()
        r.simulated = p.simulated
        r.simulated_by = p.simulated_by
        r.simulated_by_server = p.from_server
        no_nvml = nvml_reason()
        if no_nvml is not None:
            if p.simulated and p.from_server:
                r.notes.append("no GPU energy: the server's GPUs are simulated")
            elif p.simulated:
                r.notes.append("no GPU energy: the GPUs are simulated")
            else:
                r.notes.append(f"no GPU energy: {no_nvml}")
        elif energy is not None:
            r.energy_j = energy.energy_j
            if energy.reason is not None:
                r.notes.append(f"no GPU energy: {energy.reason}")
        r.gpu_names = [name for name, _ in p.gpus.values()]
        r.rate_per_hour = p.rate_per_hour()
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
        r.notes.extend(p.bound_notes())
        # the GPUs are held for the whole cell: wall time at the rate in force
        exact = cost_micro(r.rate_per_hour, round(r.wall_s * 1_000_000))
        r.cost_micro = round_micro(exact)
        if profiler is not None:
            self._ops(profiler, r)
        if r.energy_j and r.wall_s < ROUGH_ENERGY_BELOW_S:
            r.notes.append(
                f"the energy is approximate for a cell under {ROUGH_ENERGY_BELOW_S:.0f} s: "
                "NVML's energy counter moves only every 100 ms"
            )
        return r

    def _ops(self, profiler: Any, r: CellCost) -> None:
        """The operator table from the profiler's raw events (never ``key_averages()``)."""
        try:
            events = profiler.profiler.kineto_results.events()
        except AttributeError:
            r.notes.append("--ops: this PyTorch's profiler gives no events; no operators")
            return
        cuda = torch_cuda() is not None
        table = ops_table(events, cuda=cuda, top=self.top)
        if cuda and table.by != "self device time":
            r.notes.append(
                "the CUDA profile is empty (no kernel ran on the GPU, or CUPTI is not "
                "available): operators are ranked by self CPU time"
            )
        r.ops_by = table.by
        r.notes.extend(table.notes)
        if table.busy_s:
            r.gpu_busy_s = dict(table.busy_s)
            r.gpu_busy_by = "profiler"
        elif cuda:
            # the profiler saw every kernel of the cell: none ran
            r.gpu_busy_s = dict.fromkeys(r.gpu_span_s, 0.0)
            r.gpu_busy_by = "profiler"
        total = table.total_us or 1.0
        for row in table.rows:
            share = row.self_time_us / total
            if share <= 0:
                break
            r.ops.append(
                OpCost(
                    name=row.name,
                    calls=row.calls,
                    self_time_s=row.self_time_us / 1e6,
                    share=share,
                    cost_micro=round(r.cost_micro * share),
                )
            )
