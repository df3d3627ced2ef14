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
    """Energy counters that take a while to read, as NVML's can on a busy driver."""

    def __init__(self, readings: list[dict[int, float]], fail: bool = False) -> None:
        self.source = object()
        self.reason = None
        self.readings = readings
        self.fail = fail
        self.threads: list[str] = []
        self.calls = 0

    def energy_j(self) -> dict[int, float]:
        self.threads.append(threading.current_thread().name)
        threading.Event().wait(0.05)
        if self.fail:
            raise RuntimeError("NVML_ERROR_UNKNOWN")
        value = self.readings[min(self.calls, len(self.readings) - 1)]
        self.calls += 1
        return value


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
