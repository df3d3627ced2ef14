"""``--ops`` from the profiler's raw events: the same operators as ``key_averages()`` (CPU
torch, for real), GPU kernels mapped to the operators that launched them, busy time."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from jupyter_gpucost.kernel.cell import measure
from jupyter_gpucost.kernel.cell.ops import ops_table
from jupyter_gpucost.kernel.cell.prices import KernelPrices

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile  # noqa: E402

#: what :func:`workload` runs 20 times each (relu is clamp_min underneath)
WORKLOAD_OPS = {
    "aten::mm",
    "aten::matmul",
    "aten::relu",
    "aten::clamp_min",
    "aten::add",
    "aten::mul",
}


def workload(x: Any = None) -> None:
    """The shape of the recorded GPU workload, on the CPU: matmuls, then relu/add/mul.

    ``x`` is made here when not given; a test that ranks only the loop's operators makes it
    before measuring (one ``randn`` can outlast twenty ``add`` on a busy machine)."""
    if x is None:
        x = torch.randn(384, 384)
    for _ in range(20):
        y = (x @ x).relu()
        x = (y + 1.0) * 0.001


def test_the_raw_events_rank_the_same_operators_as_key_averages() -> None:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        workload()
    table = ops_table(prof.profiler.kineto_results.events(), cuda=False, top=5)
    # the reference: what the table was built from before (not used by the product)
    reference = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    expected = [(e.key, e.count) for e in reference[:5]]
    assert [(r.name, r.calls) for r in table.rows] == expected
    by_name = {e.key: e.self_cpu_time_total for e in reference}
    for row in table.rows:
        assert row.self_time_us == pytest.approx(by_name[row.name], rel=0.01, abs=1.0)
    assert table.by == "self CPU time"
    # the 20 matmuls are counted exactly (which operator ranks first is the clock's word:
    # on a busy machine a preempted add can outlast a matmul, in key_averages too)
    every = ops_table(prof.profiler.kineto_results.events(), cuda=False, top=50)
    assert ("aten::mm", 20) in [(r.name, r.calls) for r in every.rows]


@pytest.fixture
def prices() -> Iterator[None]:
    saved = measure._prices
    measure._prices = KernelPrices(gpus={}, source="test prices")
    yield
    measure._prices = saved


def test_ops_never_calls_key_averages(prices: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("key_averages() was called")

    monkeypatch.setattr(profile, "key_averages", forbidden)
    x = torch.randn(384, 384)
    m = measure.Measurement(ops=True, top=3)
    m.start()
    workload(x)
    report = m.finish("ok")
    # the workload's operators, each counted exactly (their order is the clock's word)
    assert len(report.ops) == 3
    for op in report.ops:
        assert op.name in WORKLOAD_OPS, op
        assert op.calls == 20, op
    assert report.ops_by == "self CPU time"
    assert sum(op.share for op in report.ops) <= 1.0


def test_thousands_of_tiny_operators_are_named(prices: None) -> None:
    m = measure.Measurement(ops=True, top=3)
    m.start()
    x = torch.ones(4)
    for _ in range(2000):
        x = x + 1
    report = m.finish("ok")
    assert any("2x slower or more" in n and "without --ops" in n for n in report.notes)


@dataclass
class Event:
    """A Kineto event as ``kineto_results.events()`` gives it (only what is read)."""

    name_: str
    device: str
    start: int
    duration: int
    corr: int = 0
    linked: int = 0
    thread: int = 1
    index: int = 0

    def name(self) -> str:
        return self.name_

    def device_type(self) -> str:
        return f"DeviceType.{self.device}"

    def start_ns(self) -> int:
        return self.start

    def duration_ns(self) -> int:
        return self.duration

    def correlation_id(self) -> int:
        return self.corr

    def linked_correlation_id(self) -> int:
        return self.linked

    def start_thread_id(self) -> int:
        return self.thread

    def end_thread_id(self) -> int:
        return self.thread

    def device_index(self) -> int:
        return self.index

    def is_async(self) -> bool:
        return False

    def is_hidden_event(self) -> bool:
        return False


def test_each_kernel_goes_to_the_operator_that_launched_it() -> None:
    ms = 1_000_000
    events = [
        Event("aten::matmul", "CPU", 0, 10 * ms, corr=1),
        Event("aten::mm", "CPU", 1 * ms, 8 * ms, corr=2),
        Event("cudaLaunchKernel", "CPU", 2 * ms, ms // 100, corr=3, linked=2),
        Event("aten::relu", "CPU", 11 * ms, 1 * ms, corr=4),
        Event("cudaLaunchKernel", "CPU", 11 * ms, ms // 100, corr=5, linked=4),
        # a kernel whose launch the profiler could not tie to an operator
        Event("Activity Buffer Request", "CPU", 13 * ms, ms // 100, corr=6),
        Event("sm90_xmma_gemm", "CUDA", 3 * ms, 5 * ms, linked=2),
        Event("sm90_xmma_gemm", "CUDA", 6 * ms, 4 * ms, linked=2),  # overlaps the first
        Event("relu_kernel", "CUDA", 12 * ms, 1 * ms, linked=4),
        Event("gemm_late", "CUDA", 14 * ms, 2 * ms, linked=6),
    ]
    table = ops_table(events, cuda=True, top=5)
    assert table.by == "self device time"
    assert [(r.name, r.calls, r.self_time_us) for r in table.rows] == [
        ("aten::mm", 1, 9000.0),
        ("Activity Buffer Request", 1, 2000.0),
        ("aten::relu", 1, 1000.0),
    ]
    # busy: the union of the kernels' intervals, 3-10, 12-13, 14-16 ms
    assert table.busy_s == {0: pytest.approx(0.010)}
    assert table.kernels == 4


def test_busy_time_is_per_device_and_counts_overlap_once() -> None:
    kernels = [
        Event("a", "CUDA", 0, 100, index=0),
        Event("b", "CUDA", 50, 100, index=0),
        Event("c", "CUDA", 500, 10, index=0),
        Event("d", "CUDA", 0, 40, index=1),
    ]
    assert ops_table(kernels, cuda=True, top=5).busy_s == {0: 160e-9, 1: 40e-9}


def test_no_kernel_means_no_busy_time() -> None:
    table = ops_table([Event("aten::sleep", "CPU", 0, 10**9, corr=1)], cuda=True, top=3)
    assert table.busy_s == {}
    assert table.by == "self CPU time"
