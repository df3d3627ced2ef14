"""Simulated telemetry: replays a recorded-format trace in a loop.

For the demo, Binder and the end-to-end tests, on machines without a GPU. Everything it
produces is labelled ``simulated`` in the API and the UI.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from importlib import resources
from pathlib import Path

from ..core.i18n import N_
from .base import GpuReading, SourceUnavailable, TelemetryStatus
from .trace import Trace, TraceError, read_trace

DEMO_TRACE = "a100x2-training.jsonl.gz"
TRACE_SUFFIX = ".jsonl.gz"


def _traces_dir() -> Path:
    return Path(str(resources.files("jupyter_gpucost").joinpath("data", "traces")))


def demo_trace_path() -> Path:
    return _traces_dir() / DEMO_TRACE


def shipped_traces() -> tuple[str, ...]:
    """Names of the traces shipped with the package (usable as ``simulated_trace``)."""
    return tuple(
        sorted(p.name.removesuffix(TRACE_SUFFIX) for p in _traces_dir().glob(f"*{TRACE_SUFFIX}"))
    )


def resolve_trace(value: str | Path | None) -> Path:
    """A shipped trace's name (``"h100-live"``), a path, or empty for the demo trace."""
    if not value:
        return demo_trace_path()
    text = str(value)
    if text in shipped_traces():
        return _traces_dir() / f"{text}{TRACE_SUFFIX}"
    return Path(text).expanduser()


class SimulatedSource:
    """Replays a trace: the frame shown is the one for the time since :meth:`open`."""

    name = "simulated"
    simulated = True

    def __init__(
        self,
        trace_path: str | Path | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._path = resolve_trace(trace_path)
        self._clock = clock
        self._trace: Trace | None = None
        self._t0 = 0.0
        self._energy_per_loop: list[float] = []

    def open(self) -> None:
        try:
            trace = read_trace(self._path)
        except TraceError as e:
            raise SourceUnavailable(f"simulated telemetry: {e}") from None
        self._trace = trace
        self._t0 = self._clock()
        first, last = trace.frames[0], trace.frames[-1]
        # the energy counter keeps rising across loops, as a real one would
        self._energy_per_loop = [
            (b.energy_j - a.energy_j + (b.power_w or 0.0) * trace.interval_s)
            if a.energy_j is not None and b.energy_j is not None
            else 0.0
            for a, b in zip(first, last, strict=True)
        ]

    def read(self) -> tuple[GpuReading, ...]:
        trace = self._trace
        if trace is None:
            return ()
        step = int(max(self._clock() - self._t0, 0.0) / trace.interval_s)
        loop, frame = divmod(step, len(trace.frames))
        readings = trace.frames[frame]
        if loop == 0:
            return readings
        return tuple(
            replace(r, energy_j=r.energy_j + loop * extra) if r.energy_j is not None else r
            for r, extra in zip(readings, self._energy_per_loop, strict=True)
        )

    def status(self) -> TelemetryStatus:
        if self._trace is None:
            return TelemetryStatus(
                source="simulated", simulated=True, available=False, reason=N_("trace not loaded")
            )
        trace = self._trace
        minutes = len(trace.frames) * trace.interval_s / 60
        return TelemetryStatus(
            source="simulated",
            simulated=True,
            available=True,
            detail={
                "trace": trace.name,
                "trace_file": self._path.name,
                "loop_minutes": f"{minutes:g}",
                "synthetic": "yes" if trace.synthetic else "no",
            },
        )

    def close(self) -> None:
        self._trace = None
