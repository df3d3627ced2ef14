"""The light measurement's energy step, against a stand-in for the kernel's NVML view
(no GPU here: the counters are what NVML reports, in joules per visible GPU)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from jupyter_gpucost.kernel import measure
from jupyter_gpucost.kernel.prices import KernelPrices


class SlowCounters:
    """Energy counters that take a while to read, as NVML's can on a busy driver.

    A read returns the counter as it was when the read began: the n-th read to begin gets
    the n-th reading, whichever thread finishes first."""

    def __init__(self, readings: list[dict[int, float]], fail: bool = False) -> None:
        self.source = object()
        self.reason = None
        self.readings = readings
        self.fail = fail
        self.threads: list[str] = []
        self.calls = 0
        self._lock = threading.Lock()

    def began(self, index: int) -> None:
        """Called as read number ``index`` begins."""

    def energy_j(self) -> dict[int, float]:
        with self._lock:
            index = self.calls
            self.calls += 1
            self.threads.append(threading.current_thread().name)
        self.began(index)
        threading.Event().wait(0.05)
        if self.fail:
            raise RuntimeError("NVML_ERROR_UNKNOWN")
        return self.readings[min(index, len(self.readings) - 1)]


@pytest.fixture
def prices() -> Iterator[None]:
    saved = measure._prices
    measure._prices = KernelPrices(
        gpus={"GPU-a": ("NVIDIA H100 80GB HBM3", Decimal("3.9"))},
        source="test prices",
    )
    yield
    measure._prices = saved


@pytest.fixture
def counters(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(fake: SlowCounters) -> SlowCounters:
        monkeypatch.setattr(measure, "_nvml", fake)
        return fake

    return install


def test_the_cell_energy_is_the_counters_delta_read_beside_the_cell(
    prices: None, counters: Any
) -> None:
    fake = counters(SlowCounters([{0: 1000.0, 1: 50.0}, {0: 1012.5, 1: 53.0}]))
    m = measure.Measurement()
    m.start()
    report = m.finish("ok")
    assert report.energy_j == {0: 12.5, 1: 3.0}
    # both reads ran in their own thread, not on the cell's
    assert fake.threads == ["gpucost-energy", "gpucost-energy"]
    assert "GPU 0 energy" in repr(report)


def test_a_failing_energy_read_leaves_the_energy_out_and_the_report_intact(
    prices: None, counters: Any
) -> None:
    counters(SlowCounters([], fail=True))
    m = measure.Measurement()
    m.start()
    report = m.finish("ok")
    assert report.energy_j == {}
    assert report.rate_usd_per_hour == Decimal("3.9")
    assert report.status == "ok"


def test_a_counter_that_went_backwards_is_not_reported(prices: None, counters: Any) -> None:
    # a GPU reset sets the counter back to zero: no negative energy
    counters(SlowCounters([{0: 5000.0}, {0: 10.0}]))
    m = measure.Measurement()
    m.start()
    assert m.finish("ok").energy_j == {}


class StartedCounters(SlowCounters):
    """Counters that say when a read has begun."""

    def __init__(self, readings: list[dict[int, float]]) -> None:
        super().__init__(readings)
        self.begun = [threading.Event(), threading.Event()]

    def began(self, index: int) -> None:
        self.begun[min(index, 1)].set()


class TeardownProfiler:
    """Stands for torch.profiler's context: its teardown is where --ops spends its time."""

    def __init__(self, counters: StartedCounters) -> None:
        self.counters = counters
        self.end_read_running_at_exit = False

    def __exit__(self, *exc: Any) -> None:
        # the end-of-cell energy read is already under way while the profiler shuts down
        self.end_read_running_at_exit = self.counters.begun[1].wait(2.0)

    def key_averages(self) -> list[Any]:
        return []


def test_with_ops_the_end_energy_read_runs_during_the_profiler_teardown(
    prices: None, counters: Any
) -> None:
    fake = counters(StartedCounters([{0: 100.0}, {0: 160.0}]))
    m = measure.Measurement()
    m.start()
    profiler = TeardownProfiler(fake)
    m._profiler = profiler
    report = m.finish("ok")
    assert profiler.end_read_running_at_exit
    assert report.energy_j == {0: 60.0}


def test_the_energy_of_a_short_cell_is_marked_approximate(prices: None, counters: Any) -> None:
    counters(SlowCounters([{0: 1000.0}, {0: 1075.9}]))
    m = measure.Measurement()
    m.start()
    report = m.finish("ok")
    assert report.energy_j == {0: pytest.approx(75.9)}
    assert any("approximate" in note and "20-100 ms" in note for note in report.notes)
    assert "approximate" in repr(report)


def test_the_energy_of_a_long_cell_is_not_marked_approximate(prices: None, counters: Any) -> None:
    counters(SlowCounters([{0: 1000.0}, {0: 1650.0}]))
    m = measure.Measurement()
    m.start()
    m._wall0 -= 1.5  # the cell ran for 1.5 s
    report = m.finish("ok")
    assert report.energy_j == {0: 650.0}
    assert not any("approximate" in note for note in report.notes)


class LateFirstRead(SlowCounters):
    """The read before the cell is held up (its thread was slow to run): the read after
    the cell must still come second."""

    def __init__(self, readings: list[dict[int, float]]) -> None:
        super().__init__(readings)
        self.log: list[str] = []
        self.release = threading.Event()

    def began(self, index: int) -> None:
        self.log.append(f"begin {index}")
        if index == 0:
            self.release.wait(2.0)
            self.log.append("end 0")


def test_the_read_after_the_cell_waits_for_the_read_before_it(prices: None, counters: Any) -> None:
    fake = counters(LateFirstRead([{0: 200.0}, {0: 230.0}]))
    m = measure.Measurement()
    m.start()
    threading.Timer(0.2, fake.release.set).start()
    report = m.finish("ok")
    assert fake.log == ["begin 0", "end 0", "begin 1"]
    assert report.energy_j == {0: 30.0}
