"""Alerts sent off the event loop: daemon worker threads, a bounded queue (a flood is
dropped and logged, never waited for), each delivery bounded in time and retried with
exponential backoff; at most one alert per event key (kind, user, the budget and its
period or the stop's id, the threshold: :attr:`.model.Alert.key`, never the wording),
each key remembered until the end of its period (:mod:`.memory`: a JSON file, or the hub
ledger) so that neither a restart nor thousands of other alerts send it again; each target
paced (:mod:`.pacing`), what is held back counted and said in the next alert that goes.

Nothing here blocks the caller: :meth:`AlertDispatcher.submit` only takes a lock to check
and mark the key and puts the deliveries on the queue. A target that is down costs its
worker thread the time of its tries, never billing's or enforcement's.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .deliver import DeliveryError, Send, deliver
from .memory import FileKeys, SentKeys
from .model import REMEMBER, Alert, with_held_back
from .pacing import Pacing
from .targets import Target


@dataclass(frozen=True)
class DispatchSettings:
    #: where the keys already sent are kept (``None``: in memory only)
    state_path: Path | None = None
    #: each connection step of one try
    timeout_s: float = 10.0
    #: tries after the first
    retries: int = 3
    #: the wait before the first retry, doubled before each next
    backoff_s: float = 2.0
    workers: int = 4
    #: deliveries waiting at most; more are dropped (and logged)
    queue_size: int = 500
    #: alerts and failed deliveries kept for the API and the admin page
    kept: int = 50
    #: alerts to one target in any hour, at most (0: no limit); past it they are held
    #: back, and the next one that goes says how many
    per_target_per_hour: int = 30
    #: the window that pace is counted over (an hour; shorter in tests)
    pace_window_s: float = 3600.0


@dataclass(frozen=True)
class Delivery:
    """One alert's delivery to one target, as the admin page shows it (target masked)."""

    at: datetime
    kind: str
    user: str
    title: str
    target: str
    ok: bool
    attempts: int
    error: str = ""

    def as_json(self) -> dict[str, object]:
        return {
            "at": self.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "kind": self.kind,
            "user": self.user,
            "title": self.title,
            "target": self.target,
            "ok": self.ok,
            "attempts": self.attempts,
            "error": self.error,
        }


class _Save:
    """A job that writes the keys sent (on a worker thread, never the caller's)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


_Job = tuple[Alert, Target] | _Save | None


class AlertDispatcher:
    def __init__(
        self,
        settings: DispatchSettings,
        *,
        log: logging.Logger | None = None,
        send: Send = deliver,
        sleep: Callable[[float], None] = time.sleep,
        memory: SentKeys | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.settings = settings
        self.log = log or logging.getLogger("jupyter_gpucost")
        self._send = send
        self._sleep = sleep
        self._clock = clock
        if memory is None and settings.state_path is not None:
            memory = FileKeys(settings.state_path, self.log)
        self._memory = memory
        self._lock = threading.Lock()
        self._saving = threading.Lock()
        #: every key sent, until when it is remembered (no count limit: expired ones go)
        self._sent: dict[str, datetime] = self._load()
        #: keys not yet written to the memory
        self._unsaved: dict[str, datetime] = {}
        self._pacing = Pacing(settings.per_target_per_hour, settings.pace_window_s)
        #: how many keys there were after the last pruning
        self._kept_after_prune = 1024
        self._queue: queue.Queue[_Job] = queue.Queue(maxsize=settings.queue_size)
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        #: the latest deliveries, oldest first
        self.deliveries: deque[Delivery] = deque(maxlen=settings.kept)
        self.failures: deque[Delivery] = deque(maxlen=settings.kept)
        #: started with the first alert (a server with no targets runs none)
        self._threads: list[threading.Thread] = []

    # -- the caller's side (any thread, the event loop's included) -----------------------

    def submit(self, alert: Alert, targets: Sequence[Target], *, once: bool = True) -> bool:
        """Queue ``alert`` for each target; ``False`` when its key was already sent (with
        ``once``) or there is nowhere to send it. Never blocks."""
        if not targets:
            return False
        now = self._clock()
        with self._lock:
            if not self._threads:
                self._start()
            if once:
                until = self._sent.get(alert.key)
                if until is not None and until > now:
                    if until - now < REMEMBER / 2:
                        # the event lasts: remembered for as long again
                        self._remember(alert.key, now + REMEMBER)
                        self._queue_save()
                    return False
                self._prune(now)
                self._remember(alert.key, now + REMEMBER)
            queued = held_back = 0
            tick = time.monotonic()
            for target in targets:
                held = self._pacing.take(target.url, tick)
                if held is None:
                    held_back += 1
                    if self._pacing.held(target.url) == 1:
                        # once per spell: a flood is not a flood of log lines either
                        self.log.warning(
                            "jupyter-gpucost: alerts to %s held back (more than %d an hour); "
                            "the next one that goes says how many",
                            target.masked,
                            self.settings.per_target_per_hour,
                        )
                    continue
                told = with_held_back(alert, held, self.settings.per_target_per_hour)
                try:
                    self._queue.put_nowait((told, target))
                except queue.Full:
                    self._pacing.untake(target.url, held)
                    self.log.warning(
                        "jupyter-gpucost: alert queue full; %s alert to %s dropped",
                        alert.kind,
                        target.masked,
                    )
                    continue
                queued += 1
            self._pending += queued
            if once and not queued and not held_back:
                # dropped everywhere: not sent, so it may be tried again later
                self._sent.pop(alert.key, None)
                self._unsaved.pop(alert.key, None)
        if once and (queued or held_back):
            self._queue_save()
        return queued > 0

    def _remember(self, key: str, until: datetime) -> None:
        self._sent[key] = until
        self._unsaved[key] = until

    def _prune(self, now: datetime) -> None:
        """Forget the expired keys, now and then (when the keys have doubled since)."""
        if len(self._sent) < 2 * self._kept_after_prune:
            return
        self._sent = {k: v for k, v in self._sent.items() if v > now}
        self._kept_after_prune = max(1024, len(self._sent))

    def held_back(self, target: Target) -> int:
        """Alerts to ``target`` held back by its pace, not yet told of."""
        with self._lock:
            return self._pacing.held(target.url)

    def _start(self) -> None:
        self._threads = [
            threading.Thread(target=self._work, name=f"gpucost-alerts-{n}", daemon=True)
            for n in range(max(1, self.settings.workers))
        ]
        for thread in self._threads:
            thread.start()

    def recent(self) -> list[dict[str, object]]:
        with self._lock:
            return [d.as_json() for d in self.deliveries]

    def failed(self) -> list[dict[str, object]]:
        with self._lock:
            return [d.as_json() for d in self.failures]

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every queued delivery is done (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self) -> None:
        for _thread in self._threads:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break

    # -- the workers' side ---------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if isinstance(job, _Save):
                self.save()
                continue
            alert, target = job
            record = self._try(alert, target)
            with self._idle:
                self.deliveries.append(record)
                if not record.ok:
                    self.failures.append(record)
                self._pending -= 1
                self._idle.notify_all()

    def _try(self, alert: Alert, target: Target) -> Delivery:
        s = self.settings
        error = ""
        attempts = 0
        for attempt in range(1 + max(0, s.retries)):
            attempts = attempt + 1
            try:
                self._send(alert, target, s.timeout_s)
                error = ""
                break
            except DeliveryError as e:
                error = str(e)
            except Exception as e:  # a sender's bug must not kill the worker
                error = f"{type(e).__name__}"
            if attempt < s.retries:
                self._sleep(s.backoff_s * 2**attempt)
        if error:
            self.log.warning(
                "jupyter-gpucost: %s alert to %s failed after %d tries: %s",
                alert.kind,
                target.masked,
                attempts,
                error,
            )
        return Delivery(
            datetime.now(UTC),
            alert.kind,
            alert.context.user,
            alert.title,
            target.masked,
            not error,
            attempts,
            error,
        )

    # -- the keys sent -----------------------------------------------------------------

    def _load(self) -> dict[str, datetime]:
        if self._memory is None:
            return {}
        try:
            return self._memory.load(self._clock())
        except Exception:  # a store that cannot be read: start with none, and say so
            self.log.exception("jupyter-gpucost: the alerts sent could not be read")
            return {}

    def _queue_save(self) -> None:
        if self._memory is None:
            return
        try:
            self._queue.put_nowait(_Save())
        except queue.Full:
            self.log.warning("jupyter-gpucost: alert queue full; the keys sent are kept later")

    def save(self) -> None:
        """Write the keys sent since the last write (a worker does it after each new one;
        tests and shutdown)."""
        if self._memory is None:
            return
        # one write at a time: a file is read, merged and replaced whole
        with self._saving:
            with self._lock:
                keys, self._unsaved = self._unsaved, {}
            if not keys:
                return
            try:
                self._memory.keep(keys, self._clock())
            except Exception:
                self.log.exception("jupyter-gpucost: the alerts sent could not be written")
                with self._lock:
                    self._unsaved = {**keys, **self._unsaved}
