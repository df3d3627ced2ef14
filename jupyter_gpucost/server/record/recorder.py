"""What happens after every sample: history, attribution, ledger, totals.

:meth:`Recorder.on_sample` runs in the sampler thread (in-memory work only); a flusher
thread writes to the ledger every ``flush_interval_s`` and refreshes the cached totals of
earlier sessions, so request handlers never touch the database.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from ...core.meter import MeterSnapshot
from ..gpu_use.attribution import Attribution, Attributor
from ..gpu_use.kernel_procs import KernelTracker
from ..ledger import GpuMinuteSums, Ledger, LedgerOffline, Pending, Totals, minute_of
from ..ledger.journal import Journal, JournalEntry
from ..sampler import Published
from .history import GpuPoint, HistoryRing, Point


@dataclass(frozen=True)
class LiveTotals:
    """Today / this month / all time, in micro-units of the session's currency, this session
    included."""

    today_micro: int
    month_micro: int
    all_time_micro: int


#: how long a clean stop waits for a ledger that cannot be reached
STOP_WAIT_S = 10.0


@dataclass(frozen=True)
class Unwritten:
    """What the ledger does not have yet: seconds of this session and their cost (with
    earlier sessions' journals), and whether it is in the local journal."""

    seconds: float
    #: in micro-units of the session's currency
    cost_micro: int
    journaled: bool


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
        journal: Journal | None = None,
        started: tuple[datetime, str | None] | None = None,
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
        #: one flush at a time (the flusher thread, a history read, the stop)
        self._flush_lock = threading.Lock()
        #: parts earlier flushes could not write, oldest first
        self._queue: list[Pending] = []
        #: the time up to which the ledger has every sample; the latest sample's time
        self._written_until_s = self._last_sample_s = (
            time.time() if started is None else started[0].timestamp()
        )
        #: the local journal of a remote ledger, the session's start and user for it
        self.journal = journal
        self._journal_start = started
        self._journaled = False
        #: earlier servers' journals not written yet
        self._orphans: list[JournalEntry] = []
        #: when the session ended (set by a clean stop)
        self._ended: datetime | None = None

    # -- sampler thread --------------------------------------------------------

    def on_sample(self, published: Published) -> None:
        snap = published.snapshot
        now_s = snap.as_of.timestamp()
        cost = snap.cost_micro
        delta_cost = snap.cost_delta_micro
        delta_idle = snap.idle_delta_micro
        self._last_cost = cost
        rate = int(snap.rate_per_hour * 1_000_000)
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
            p.cost_micro += delta_cost
            p.idle_micro += delta_idle
            p.energy_j = snap.energy_j
            p.peak_memory_bytes = self.peak_memory_bytes
            p.last_unix_s = now_s
            self._last_sample_s = now_s
            self._by_day[day] = self._by_day.get(day, 0) + delta_cost
        self.ring.append(
            Point(
                unix_s=now_s,
                cost_micro=cost,
                rate_micro_per_hour=rate,
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
        ahead = max(snapshot.cost_micro - self._last_cost, 0)
        return LiveTotals(
            today_micro=others.today_micro + today + ahead,
            month_micro=others.month_micro + this_month + ahead,
            all_time_micro=others.all_time_micro + snapshot.cost_micro,
        )

    # -- flusher thread --------------------------------------------------------

    def start(self) -> None:
        if self.ledger is None or self._thread is not None:
            return
        if self.journal is not None:
            # what earlier servers could not write to this remote ledger
            self._orphans = [e for e in self.journal.load_all() if e.session_id != self.session_id]
            for entry in self._orphans:
                self.ledger.remember_start(entry.session_id, entry.started, entry.user)
        self.flush()
        self._thread = threading.Thread(target=self._run, name="gpucost-ledger", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            self.flush()

    def flush(self) -> bool:
        """Write what was counted since the last flush (and what earlier flushes and
        earlier servers' journals could not write); True when the ledger has it all."""
        if self.ledger is None:
            return True
        with self._flush_lock:
            with self._lock:
                if not self._pending.empty():
                    self._queue.append(self._pending)
                    self._pending = Pending()
                waiting = list(self._queue)
                until = self._last_sample_s
            try:
                self._write_orphans()
                self.ledger.write(self.session_id, waiting)
                if self._ended is not None:
                    self.ledger.end_session(self.session_id, self._ended)
            except LedgerOffline:
                with self._lock:
                    # ``write`` left in ``waiting`` exactly what the ledger lacks
                    self._queue[:] = waiting
                self._journal_now()
                return False
            except Exception as e:  # not a spell: kept, logged once, tried again
                if not self._flush_failed:
                    self._flush_failed = True
                    self.log.warning("jupyter-gpucost: writing the ledger failed: %s", e)
                return False
            with self._lock:
                self._queue.clear()
                self._written_until_s = until
            if self._journaled and self.journal is not None:
                self.journal.remove(self.session_id)
                self._journaled = False
            if self._flush_failed:
                self._flush_failed = False
                self.log.info("jupyter-gpucost: the ledger is written again")
        self._refresh_others()
        return True

    def _write_orphans(self) -> None:
        assert self.ledger is not None
        while self._orphans:
            entry = self._orphans[0]
            try:
                self.ledger.write(entry.session_id, entry.parts)
                if entry.ended is not None:
                    self.ledger.end_session(entry.session_id, entry.ended)
            except LedgerOffline:
                raise
            except Exception as e:  # not a spell: this journal never blocks the session's
                self.log.warning(
                    "jupyter-gpucost: the journal of session %s cannot be written (%s); it "
                    "is left where it is",
                    entry.session_id,
                    e,
                )
                self._orphans.pop(0)
                continue
            if self.journal is not None:
                self.journal.remove(entry.session_id)
            self.log.info(
                "jupyter-gpucost: the journal of session %s is written to the ledger",
                entry.session_id,
            )
            self._orphans.pop(0)

    def _journal_now(self) -> None:
        """Keep what is not written in the local journal (a remote ledger only)."""
        if self.journal is None or self._journal_start is None:
            return
        with self._lock:
            parts = [*self._queue]
        started, user = self._journal_start
        entry = JournalEntry(self.session_id, started, user, parts, self._ended)
        self._journaled = self.journal.save(entry) or self._journaled

    def flush_if_stale(self) -> None:
        """Write what is pending now (before reading the ledger back; off the loop)."""
        self.flush()

    def unwritten(self, now_s: float) -> Unwritten:
        """What is waiting to be written: the metered seconds and their cost."""
        with self._lock:
            cost = sum(p.cost_micro for p in self._queue) + self._pending.cost_micro
            empty = not self._queue and self._pending.empty()
            since = self._written_until_s
        orphans = sum(p.cost_micro for e in self._orphans for p in e.parts)
        return Unwritten(
            seconds=0.0 if empty else max(now_s - since, 0.0),
            cost_micro=cost + orphans,
            journaled=self._journaled,
        )

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

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """Stop the flusher and write what is left, trying for at most ``wait_s`` while
        the ledger cannot be reached; then it stays in the journal (a remote ledger)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self.ledger is None:
            return
        self._ended = datetime.now(UTC)
        deadline = time.monotonic() + wait_s
        while True:
            self.ledger.retry_now()
            if self.flush():
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(min(0.5, max(deadline - time.monotonic(), 0.0)))
        self._journal_now()
        left = self.unwritten(time.time())
        self.log.warning(
            "jupyter-gpucost: the ledger cannot be reached at stop: %.0f s of this session "
            "(%d micro-units) are not written%s",
            left.seconds,
            left.cost_micro,
            "; they are in the journal and written at the next start" if left.journaled else "",
        )
