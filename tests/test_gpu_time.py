"""What a cell reports as GPU time: busy time only where it was measured; the span between
two CUDA events is called a span. Recorded on an H100: a ``time.sleep(2)`` cell on an idle
GPU had an event span of 2.001 s, which the badge used to show as "GPU 2.00 s"."""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest

from jupyter_gpucost.kernel.cell import measure
from jupyter_gpucost.kernel.cell.prices import KernelPrices
from jupyter_gpucost.kernel.magics import magic_record
from jupyter_gpucost.server.record.cells import clean


class Event:
    """A CUDA event on an idle GPU: it completes when recorded."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.at = 0.0

    def record(self) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: Event) -> float:
        return (end.at - self.at) * 1e3


def idle_cuda_torch() -> SimpleNamespace:
    """torch as a notebook leaves it after starting CUDA on one idle GPU."""
    cuda = SimpleNamespace(
        is_available=lambda: True,
        is_initialized=lambda: True,
        device_count=lambda: 1,
        device=lambda i: nullcontext(),
        reset_peak_memory_stats=lambda i: None,
        max_memory_allocated=lambda i: 512 * 2**20,
        Event=Event,
    )
    return SimpleNamespace(cuda=cuda)


@pytest.fixture
def cuda_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", idle_cuda_torch())
    monkeypatch.setattr(
        measure,
        "_prices",
        KernelPrices(gpus={"GPU-a": ("NVIDIA H100 80GB HBM3", Decimal("6.88"))}, source="t"),
    )


def test_a_sleep_cell_on_an_idle_gpu_shows_no_gpu_busy_time(cuda_kernel: None) -> None:
    m = measure.Measurement()
    m.start()
    time.sleep(0.3)
    report = m.finish("ok")
    assert report.gpu_span_s[0] >= 0.3  # the events' span is the wall time ...
    assert report.gpu_busy_s == {}  # ... and is not reported as busy time
    shown = repr(report)
    assert "GPU 0 span (CUDA events, idle included)" in shown
    assert "busy" not in shown
    record = clean(magic_record(report, None))
    # the server keeps no busy time for it, so the badge shows no "GPU 0.30 s"
    assert record["gpu_busy_s"] is None
    assert record["gpu_busy_by"] is None
    assert record["gpu_span_s"]["0"] >= 0.3


def test_busy_time_measured_by_the_profiler_is_reported_as_busy(cuda_kernel: None) -> None:
    m = measure.Measurement()
    m.start()
    report = m.finish("ok")
    # as ``--ops`` sets them from the kernels the profiler saw
    report.gpu_busy_s = {0: 0.125}
    report.gpu_busy_by = "profiler"
    assert "GPU 0 busy (profiler)" in repr(report)
    record: dict[str, Any] = clean(magic_record(report, None))
    assert record["gpu_busy_s"] == {"0": 0.125}
    assert record["gpu_busy_by"] == "profiler"
