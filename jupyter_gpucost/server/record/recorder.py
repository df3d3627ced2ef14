"""What happens after every sample: history, attribution, ledger, totals.

:meth:`Recorder.on_sample` runs in the sampler thread (in-memory work only); a flusher
thread writes to the ledger every ``flush_interval_s`` and refreshes the cached totals of
earlier sessions, so request handlers never touch the database.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from ...core.meter import MeterSnapshot
from ..gpu_use.attribution import Attribution, Attributor
from ..gpu_use.kernel_procs import KernelTracker
from ..ledger import GpuMinuteSums, Ledger, Pending, Totals, minute_of
from ..sampler import Published
from .history import GpuPoint, HistoryRing, Point


@dataclass(frozen=True)
class LiveTotals:
    """Today / this month / all time, in micro-dollars, this session included."""

    today_micro_usd: int
    month_micro_usd: int
    all_time_micro_usd: int


class Recorder:
    def __init__(
        self,
        *,
        ledger: Ledger | None,
        session_id: str,
        flush_interval_s: float,
        tracker: KernelTracker,
        attributor: Attributor,
        ring: HistoryRing,
        log: logging.Logger,
        listeners: list[Callable[[Published, Attribution | None], None]] | None = None,
    ) -> None:
        self.ledger = ledger
        self.session_id = session_id
        self.flush_interval_s = flush_interval_s
        self.tracker = tracker
        self.attributor = attributor
        self.ring = ring
        self.log = log
        self.listeners = listeners or []
        self._lock = threading.Lock()
        self._pending = Pending()
        #: the cost of the latest sample recorded
        self._last_cost = 0
        #: this session's spend per local day start (unix s), live
        self._by_day: dict[float, int] = {}
        self.peak_memory_bytes: int | None = None
        self._others = Totals(0, 0, 0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._flush_failed = False

    # -- sampler thread --------------------------------------------------------

    def on_sample(self, published: Published) -> None:
        snap = published.snapshot
        now_s = snap.as_of.timestamp()
        cost = snap.cost_micro_usd
        delta_cost = snap.cost_delta_micro_usd
        delta_idle = snap.idle_delta_micro_usd
        self._last_cost = cost
        rate = int(snap.rate_usd_per_hour * 1_000_000)
        minute = minute_of(now_s)
        memory = [
            g.reading.memory_used_bytes
            for g in snap.gpus
            if g.reading is not None and g.reading.memory_used_bytes is not None
        ]
        if memory:
            top = max(memory)
            self.peak_memory_bytes = max(self.peak_memory_bytes or 0, top)
        day = self._day_start(snap.as_of)
        with self._lock:
            p = self._pending
            row = p.spend.setdefault(minute, [0, 0, rate])
            row[0] += delta_cost
            row[1] += delta_idle
            row[2] = rate
            for g in snap.gpus:
                r = g.reading
                if r is None or r.lost:
                    continue
                sums = p.gpus.setdefault((g.index, minute), GpuMinuteSums())
                sums.add(r.utilization_pct, r.power_w, r.memory_used_bytes)
            p.cost_micro_usd += delta_cost
            p.idle_micro_usd += delta_idle
            p.energy_j = snap.energy_j
            p.peak_memory_bytes = self.peak_memory_bytes
            p.last_unix_s = now_s
            self._by_day[day] = self._by_day.get(day, 0) + delta_cost
        self.ring.append(
            Point(
                unix_s=now_s,
                cost_micro_usd=cost,
                rate_micro_usd_per_hour=rate,
                gpus=tuple(
                    GpuPoint(
                        index=g.index,
                        utilization_pct=g.reading.utilization_pct if g.reading else None,
                        memory_used_bytes=g.reading.memory_used_bytes if g.reading else None,
                        power_w=g.reading.power_w if g.reading else None,
                    )
                    for g in snap.gpus
                ),
            )
        )
        attribution = self.attributor.update(snap, self.tracker.kernels(), self.tracker.processes())
        for listener in self.listeners:
            try:
                listener(published, attribution)
            except Exception:
                self.log.exception("jupyter-gpucost: a sample listener failed")

    def _day_start(self, when: datetime) -> float:
        if self.ledger is not None:
            return self.ledger.day_start(when).timestamp()
        local = when.astimezone()
        return local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()

    # -- totals ----------------------------------------------------------------

    def totals(self, snapshot: MeterSnapshot) -> LiveTotals | None:
        """Every session's spend, with this one live (``None`` without a ledger)."""
        if self.ledger is None:
            return None
        now = snapshot.as_of
        day = self.ledger.day_start(now).timestamp()
        month = self.ledger.month_start(now).timestamp()
        with self._lock:
            today = self._by_day.get(day, 0)
            this_month = sum(v for d, v in self._by_day.items() if d >= month)
            others = self._others
        # the meter may be a sample ahead of the recorder: count what it says now
        ahead = max(snapshot.cost_micro_usd - self._last_cost, 0)
        return LiveTotals(
            today_micro_usd=others.today_micro_usd + today + ahead,
            month_micro_usd=others.month_micro_usd + this_month + ahead,
            all_time_micro_usd=others.all_time_micro_usd + snapshot.cost_micro_usd,
        )

    # -- flusher thread --------------------------------------------------------

    def start(self) -> None:
        if self.ledger is None or self._thread is not None:
            return
        self._refresh_others()
        self._thread = threading.Thread(target=self._run, name="gpucost-ledger", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            self.flush()

    def flush(self) -> None:
        if self.ledger is None:
            return
        with self._lock:
            pending, self._pending = self._pending, Pending()
        try:
            self.ledger.flush(self.session_id, pending)
        except Exception as e:
            # keep what was not written; try again at the next flush
            with self._lock:
                self._merge_back(pending)
            if not self._flush_failed:
                self._flush_failed = True
                self.log.warning("jupyter-gpucost: writing the ledger failed: %s", e)
            return
        if self._flush_failed:
            self._flush_failed = False
            self.log.info("jupyter-gpucost: the ledger is written again")
        self._refresh_others()

    def flush_if_stale(self) -> None:
        """Write what is pending now (before reading the ledger back; off the loop)."""
        self.flush()

    def _merge_back(self, old: Pending) -> None:
        new = self._pending
        for minute, (cost, idle, rate) in old.spend.items():
            row = new.spend.setdefault(minute, [0, 0, rate])
            row[0] += cost
            row[1] += idle
        for key, sums in old.gpus.items():
            new.gpus.setdefault(key, GpuMinuteSums()).merge(sums)
        new.cost_micro_usd += old.cost_micro_usd
        new.idle_micro_usd += old.idle_micro_usd
        new.energy_j = new.energy_j if new.energy_j is not None else old.energy_j
        new.peak_memory_bytes = new.peak_memory_bytes or old.peak_memory_bytes
        new.last_unix_s = max(new.last_unix_s, old.last_unix_s)

    def _refresh_others(self) -> None:
        if self.ledger is None:
            return
        try:
            others = self.ledger.totals(datetime.now(UTC), exclude_session=self.session_id)
        except Exception as e:
            self.log.debug("jupyter-gpucost: cannot read ledger totals: %s", e)
            return
        with self._lock:
            self._others = others

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self.ledger is not None:
            self.flush()
            try:
                self.ledger.end_session(self.session_id, datetime.now(UTC))
            except Exception as e:
                self.log.warning("jupyter-gpucost: could not close the session: %s", e)
