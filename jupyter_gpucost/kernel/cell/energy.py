"""The GPUs' energy over a cell, read beside the cell and never on its thread.

NVML's total-energy counter takes 2.4-3.3 ms a read on an H100 (a core busy meanwhile;
``nvmlDeviceGetFieldValues`` is no faster) and moves only every 100 ms. So one reader
thread reads it every 50 ms while cells run — started by the first priced cell, stopped
once no cell has run for :data:`IDLE_STOP_S` — and a cell's energy is the counter
interpolated at the cell's two ends: the start between the readings around it, the end
from the latest readings and the counter's recent slope (the cell's thread never waits
for a read). At exactly 100 ms a reader locks onto the counter's update and each read
takes 15 ms; at 50 ms it stays within one counter step of blocking reads. A cell shorter
than the counter's resolution gets no energy figure, and the report says why, instead of
0 J.

Which function reads the counters is given by the caller, so that NVML is opened in the
reader's thread too.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: the reader's period: not 100 ms, which locks onto the counter's own update
PERIOD_S = 0.05
#: the counter's resolution on the GPUs measured (H100: it moves every 100 ms)
COUNTER_RESOLUTION_S = 0.1
#: the reader stops once no cell has run for this long
IDLE_STOP_S = 2.0
#: the end of a cell is extrapolated with the slope over about this much of the past
SLOPE_WINDOW_S = 0.5

Reading = tuple[float, dict[int, float]]


@dataclass(slots=True)
class Mark:
    """A cell's start: the readings just before and just after it, once both exist."""

    at: float
    before: Reading | None = None
    after: Reading | None = None


@dataclass(frozen=True)
class CellEnergy:
    """Joules per GPU over a cell, or why there is no figure."""

    energy_j: dict[int, float]
    #: why there is no figure (``None`` when there is one)
    reason: str | None = None


class EnergyReader:
    """One background reader of the energy counters for the whole kernel."""

    def __init__(
        self,
        read: Callable[[], dict[int, float]],
        *,
        absent: Callable[[], bool] = lambda: False,
        period_s: float = PERIOD_S,
        idle_stop_s: float = IDLE_STOP_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._read = read
        #: says, after a read, that there are no counters to read (no NVML): the reader
        #: then stops for good
        self._absent = absent
        self._gone = False
        self._period_s = period_s
        self._idle_stop_s = idle_stop_s
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._readings: deque[Reading] = deque(maxlen=64)
        self._marks: list[Mark] = []
        self._running_cells = 0
        self._last_end = 0.0
        self._thread: threading.Thread | None = None
        #: reads made, and the reason the last one failed (for tests and the report)
        self.reads = 0
        self.error: str | None = None

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def cell_started(self) -> Mark:
        """A priced cell starts now: make sure the reader runs, and mark the time."""
        mark = Mark(self._clock())
        if self._gone:  # no counters here: nothing to keep
            return mark
        with self._lock:
            self._running_cells += 1
            if self._thread is None or not self._thread.is_alive():
                # readings from before the reader stopped say nothing about now
                self._readings.clear()
            if self._readings:
                mark.before = self._readings[-1]
            self._marks.append(mark)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="gpucost-energy", daemon=True
                )
                self._thread.start()
        return mark

    def cell_ended(self, mark: Mark) -> CellEnergy:
        """The cell that ``mark`` started has ended: its energy, without waiting for a read."""
        end = self._clock()
        if self._gone:
            return CellEnergy({}, "this machine has no GPU energy counters")
        with self._lock:
            self._running_cells = max(self._running_cells - 1, 0)
            self._last_end = end
            if mark in self._marks:
                self._marks.remove(mark)
            readings = list(self._readings)
        if end - mark.at < COUNTER_RESOLUTION_S:
            return CellEnergy(
                {},
                f"the cell was shorter than the energy counter's resolution "
                f"({COUNTER_RESOLUTION_S * 1000:.0f} ms): no energy figure",
            )
        if mark.after is None:
            if self.error is not None:
                return CellEnergy({}, f"the energy counter could not be read: {self.error}")
            return CellEnergy({}, "the energy counter was not read during the cell")
        start = _at_start(mark)
        finish = _extrapolated(readings, end)
        energy = {
            index: finish[index] - joules
            for index, joules in start.items()
            if index in finish and finish[index] >= joules
        }
        return CellEnergy(energy)

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop the reader now (unloading the extension)."""
        with self._lock:
            self._running_cells = 0
            self._last_end = -1e18
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            t0 = self._clock()
            try:
                values = self._read()
                self.error = None
            except Exception as e:
                values = {}
                self.error = str(e) or type(e).__name__
            t1 = self._clock()
            if not values and self._absent():
                with self._lock:
                    self._gone = True
                    self._thread = None
                return
            reading: Reading = ((t0 + t1) / 2, values)
            with self._lock:
                self.reads += 1
                if values:
                    self._readings.append(reading)
                    for mark in self._marks:
                        if mark.after is None:
                            if reading[0] < mark.at:
                                mark.before = reading
                            else:
                                mark.after = reading
                idle = self._running_cells == 0 and t1 - self._last_end > self._idle_stop_s
                if idle:
                    self._thread = None
                    return
            self._wake.wait(max(self._period_s - (self._clock() - t0), 0.0))
            self._wake.clear()


def _interpolate(a: Reading, b: Reading, at: float) -> dict[int, float]:
    (ta, ea), (tb, eb) = a, b
    if tb <= ta:
        return dict(eb)
    f = min(max((at - ta) / (tb - ta), 0.0), 1.0)
    return {i: ea[i] + (eb[i] - ea[i]) * f for i in ea if i in eb}


def _at_start(mark: Mark) -> dict[int, float]:
    assert mark.after is not None
    if mark.before is None:
        return dict(mark.after[1])
    return _interpolate(mark.before, mark.after, mark.at)


def _extrapolated(readings: list[Reading], at: float) -> dict[int, float]:
    """The counters at ``at``, past the newest reading: its value plus the recent slope."""
    last_t, last = readings[-1]
    first_t, first = readings[0]
    for t, values in readings:
        if last_t - t <= SLOPE_WINDOW_S:
            first_t, first = t, values
            break
    if last_t - first_t <= 0 or at <= last_t:
        return dict(last)
    out = {}
    for i, joules in last.items():
        slope = (joules - first.get(i, joules)) / (last_t - first_t)
        out[i] = joules + max(slope, 0.0) * (at - last_t)
    return out
