"""The one sampler of the server: polls the telemetry source from its own thread.

NVML calls can take milliseconds and serialise on a driver lock, so they never run on the
event loop. The sampler reads every device, feeds the meter and publishes an immutable
snapshot; request handlers only ever read that snapshot. Between readings it polls a
source that collects something the next reading needs (:class:`PollingSource`: NVML's
per-process samples) every :data:`POLL_INTERVAL_S`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from ..core.catalog import Price, PricePolicy
from ..core.meter import Meter, MeterSnapshot
from ..telemetry.base import PollingSource, TelemetrySource, TelemetryStatus

#: how often a source that collects between readings (NVML's per-process samples) is
#: polled: the driver takes a per-process sample about every 0.2 s and keeps only the
#: newest, so four polls a second see them all (docs/telemetry-nvml.md)
POLL_INTERVAL_S = 0.25


@dataclass(frozen=True)
class SamplerStats:
    samples: int
    failed_reads: int
    #: CPU time the sampler thread spent reading and metering, in total and at most once
    cpu_s_total: float
    cpu_s_max: float
    #: wall time of the last read + update
    last_duration_s: float


@dataclass(frozen=True)
class Published:
    snapshot: MeterSnapshot
    telemetry: TelemetryStatus


def monotonic_us() -> int:
    return time.monotonic_ns() // 1_000


def utc_now() -> datetime:
    return datetime.now(UTC)


class Sampler:
    def __init__(
        self,
        source: TelemetrySource,
        meter: Meter,
        *,
        interval_s: float,
        log: logging.Logger | None = None,
        clock_us: Callable[[], int] = monotonic_us,
        wall: Callable[[], datetime] = utc_now,
        poll_interval_s: float = POLL_INTERVAL_S,
    ) -> None:
        self._source = source
        self._poll_interval_s = poll_interval_s
        self._meter = meter
        self._interval_s = interval_s
        self._log = log or logging.getLogger(__name__)
        self._clock_us = clock_us
        self._wall = wall
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: keeps a meter update and a reprice apart
        self._meter_lock = threading.Lock()
        self._published = Published(meter.snapshot(), source.status())
        self._failed_reads = 0
        self._cpu_total = 0.0
        self._cpu_max = 0.0
        self._last_duration = 0.0
        self._logged_errors: set[str] = set()
        #: called in the sampler thread with every new sample, after it is published
        self.listeners: list[Callable[[Published], None]] = []

    @property
    def latest(self) -> Published:
        with self._lock:
            return self._published

    def stats(self) -> SamplerStats:
        with self._lock:
            return SamplerStats(
                samples=self._published.snapshot.samples,
                failed_reads=self._failed_reads,
                cpu_s_total=self._cpu_total,
                cpu_s_max=self._cpu_max,
                last_duration_s=self._last_duration,
            )

    def sample_once(self) -> Published:
        """Read, meter and publish once (the thread's body; also used by tests)."""
        cpu0 = time.thread_time()
        wall0 = time.perf_counter()
        try:
            readings = self._source.read()
        except Exception as e:
            # a source must not raise, but if one does, bill the time as unobserved
            readings = None
            self._failed_reads += 1
            kind = type(e).__name__
            if kind not in self._logged_errors:
                self._logged_errors.add(kind)
                self._log.warning("jupyter-gpucost: telemetry read failed: %s", e, exc_info=True)
        with self._meter_lock:
            snapshot = self._meter.update(readings, self._clock_us(), self._wall())
        published = Published(snapshot, self._source.status())
        cpu = time.thread_time() - cpu0
        with self._lock:
            self._published = published
            self._cpu_total += cpu
            self._cpu_max = max(self._cpu_max, cpu)
            self._last_duration = time.perf_counter() - wall0
        for listener in self.listeners:
            try:
                listener(published)
            except Exception:
                self._log.exception("jupyter-gpucost: a sample listener failed")
        return published

    def prices(self) -> tuple[dict[str, Price | None], Decimal]:
        """The prices in force now (:meth:`Meter.prices`; any thread)."""
        with self._meter_lock:
            return self._meter.prices()

    def reprice(self, policy: PricePolicy, base_per_hour: Decimal) -> None:
        """New prices from the last sample on (:meth:`Meter.reprice`; any thread)."""
        with self._meter_lock:
            self._meter.reprice(policy, base_per_hour)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="gpucost-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception:  # never let the thread die silently
                self._log.exception("jupyter-gpucost: sampler iteration failed")
            next_at += self._interval_s
            if next_at < time.monotonic():  # fell behind (suspended machine, long read)
                next_at = time.monotonic()  # skip, don't burst
            self._wait_polling(next_at)

    def _wait_polling(self, until: float) -> None:
        """Wait until ``until`` (monotonic), polling the source meanwhile if it polls."""
        poller = self._source if isinstance(self._source, PollingSource) else None
        polls = poller is not None and self._poll_interval_s > 0
        while not self._stop.is_set():
            delay = until - time.monotonic()
            if delay <= 0:
                return
            if poller is None or not polls or delay <= self._poll_interval_s:
                self._stop.wait(delay)
                return
            self._stop.wait(self._poll_interval_s)
            if self._stop.is_set():
                return
            try:
                poller.poll()
            except Exception:
                self._log.exception("jupyter-gpucost: polling the telemetry source failed")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread (blocking: call it off the event loop)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self._source.close()
