"""The light measurement's energy, against an H100's energy counter as NVML reports it
(no GPU here): read by a reader thread every 50 ms, never on the cell's thread."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from nvml_stub import DRIVER_570, FakeNvml, h100_80gb

from jupyter_gpucost.kernel.cell import measure
from jupyter_gpucost.kernel.cell.energy import COUNTER_RESOLUTION_S, EnergyReader
from jupyter_gpucost.kernel.cell.prices import KernelPrices

#: what the H100 drew while busy, and how its counter moved: every 100 ms, in steps
POWER_W = 697.0
STEP_S = 0.1


class H100Counter(FakeNvml):
    """An H100 whose total-energy counter moves every 100 ms at 697 W, and whose reads
    take 2.4 ms (recorded); every call is counted by the thread that made it."""

    def __init__(self) -> None:
        super().__init__([h100_80gb()], DRIVER_570)
        self.t0 = time.monotonic()
        self.by_thread: Counter[str] = Counter()

    def _count(self, name: str) -> None:
        self.by_thread[threading.current_thread().name] += 1
        super()._count(name)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        self._gpu("nvmlDeviceGetTotalEnergyConsumption", handle)
        time.sleep(0.0024)
        steps = int((time.monotonic() - self.t0) / STEP_S)
        return 1_000_000_000 + round(steps * STEP_S * POWER_W * 1000)


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
def h100(monkeypatch: pytest.MonkeyPatch) -> Iterator[H100Counter]:
    """A kernel whose NVML is the H100 stand-in, opened afresh by whoever asks first."""
    fake = H100Counter()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(measure, "_nvml", None)
    monkeypatch.setattr(measure, "_energy", None)
    yield fake
    if measure._energy is not None:
        measure._energy.stop()


def measured(seconds: float) -> measure.CellCost:
    m = measure.Measurement()
    m.start()
    time.sleep(seconds)
    return m.finish("ok")


def test_the_light_measurement_calls_no_nvml_on_the_cells_thread(
    prices: None, h100: H100Counter
) -> None:
    cell_thread = threading.current_thread().name
    measured(0.3)  # the first priced cell starts the reader (and NVML, in its thread)
    report = measured(0.6)
    assert h100.by_thread[cell_thread] == 0
    assert h100.by_thread["gpucost-energy"] > 0
    # the counter's 100 ms steps at 697 W: within about one step of the truth
    (joules,) = report.energy_j.values()
    assert joules == pytest.approx(POWER_W * report.wall_s, abs=1.5 * POWER_W * STEP_S)
    assert "GPU 0 energy" in repr(report)


def test_a_cell_shorter_than_the_counter_resolution_says_so_instead_of_0_j(
    prices: None, h100: H100Counter
) -> None:
    measured(0.2)
    report = measured(0.02)
    assert report.energy_j == {}
    assert any("shorter than the energy counter's resolution (100 ms)" in n for n in report.notes)
    assert "0.0 J" not in repr(report)
    assert COUNTER_RESOLUTION_S == STEP_S


def test_the_reader_starts_with_the_first_priced_cell_and_stops_when_idle() -> None:
    reads: list[str] = []

    def read() -> dict[int, float]:
        reads.append(threading.current_thread().name)
        return {0: 1000.0 + len(reads)}

    reader = EnergyReader(read, idle_stop_s=0.2)
    time.sleep(0.1)
    assert reads == []
    assert not reader.running
    mark = reader.cell_started()
    assert reader.running
    time.sleep(0.15)
    reader.cell_ended(mark)
    deadline = time.monotonic() + 10
    while reader.running:
        assert time.monotonic() < deadline, "the reader did not stop once idle"
        time.sleep(0.05)
    stopped_at = len(reads)
    time.sleep(0.2)
    assert len(reads) == stopped_at
    assert set(reads) == {"gpucost-energy"}
    # the next priced cell starts it again
    mark = reader.cell_started()
    assert reader.running
    reader.cell_ended(mark)
    reader.stop()


def test_a_failing_counter_leaves_the_energy_out_and_says_why() -> None:
    def read() -> dict[int, float]:
        raise RuntimeError("NVML_ERROR_UNKNOWN")

    reader = EnergyReader(read)
    mark = reader.cell_started()
    time.sleep(0.2)
    energy = reader.cell_ended(mark)
    reader.stop()
    assert energy.energy_j == {}
    assert energy.reason is not None
    assert "NVML_ERROR_UNKNOWN" in energy.reason


def test_a_counter_that_went_backwards_is_not_reported() -> None:
    # a GPU reset sets the counter back to zero: no negative energy
    values = iter([5000.0, 5000.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0])

    def read() -> dict[int, float]:
        return {0: next(values, 10.0)}

    reader = EnergyReader(read)
    mark = reader.cell_started()
    time.sleep(0.3)
    energy = reader.cell_ended(mark)
    reader.stop()
    assert energy.energy_j == {}


def test_without_nvml_the_reader_stops_for_good() -> None:
    reads: list[int] = []

    def read() -> dict[int, float]:
        reads.append(1)
        return {}

    reader = EnergyReader(read, absent=lambda: True)
    mark = reader.cell_started()
    deadline = time.monotonic() + 10
    while reader.running:
        assert time.monotonic() < deadline, "the reader kept running without counters"
        time.sleep(0.02)
    energy = reader.cell_ended(mark)
    assert energy.energy_j == {}
    reader.cell_ended(reader.cell_started())
    time.sleep(0.1)
    assert not reader.running
    assert len(reads) == 1
