"""Alerts sent off the event loop: daemon worker threads, a bounded queue (a flood is
dropped and logged, never waited for), each delivery bounded in time and retried with
exponential backoff; at most one alert per key (``(event, subject, threshold)``), the keys
sent kept in a JSON file so that a restart does not send them again.

Nothing here blocks the caller: :meth:`AlertDispatcher.submit` only takes a lock to check
and mark the key and puts the deliveries on the queue. A target that is down costs its
worker thread the time of its tries, never billing's or enforcement's.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .deliver import DeliveryError, Send, deliver
from .model import Alert
from .targets import Target

#: keys remembered (the oldest forgotten first)
KEYS_KEPT = 5000


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


_Job = tuple[Alert, Target] | _Save | None


class AlertDispatcher:
    def __init__(
        self,
        settings: DispatchSettings,
        *,
        log: logging.Logger | None = None,
        send: Send = deliver,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.log = log or logging.getLogger("jupyter_gpucost")
        self._send = send
        self._sleep = sleep
        self._lock = threading.Lock()
        self._sent: dict[str, None] = dict.fromkeys(self._load())
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
        with self._lock:
            if not self._threads:
                self._start()
            if once:
                if alert.key in self._sent:
                    return False
                self._sent[alert.key] = None
                while len(self._sent) > KEYS_KEPT:
                    del self._sent[next(iter(self._sent))]
            queued = 0
            for target in targets:
                try:
                    self._queue.put_nowait((alert, target))
                except queue.Full:
                    self.log.warning(
                        "jupyter-gpucost: alert queue full; %s alert to %s dropped",
                        alert.kind,
                        target.masked,
                    )
                    continue
                queued += 1
            self._pending += queued
            if once and not queued:
                # dropped everywhere: not sent, so it may be tried again later
                self._sent.pop(alert.key, None)
        if once and queued:
            self._queue_save()
        return queued > 0

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

    def _load(self) -> list[str]:
        path = self.settings.state_path
        if path is None or not path.is_file():
            return []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.log.warning("jupyter-gpucost: the alerts' state file could not be read")
            return []
        keys = data.get("sent") if isinstance(data, dict) else None
        return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []

    def _queue_save(self) -> None:
        if self.settings.state_path is None:
            return
        try:
            self._queue.put_nowait(_Save())
        except queue.Full:
            self.log.warning("jupyter-gpucost: alert queue full; the keys sent are kept later")

    def save(self) -> None:
        """Write the keys sent (a worker does it after each new one; tests and shutdown)."""
        path = self.settings.state_path
        if path is None:
            return
        with self._lock:
            keys = list(self._sent)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps({"sent": keys}), encoding="utf-8")
            os.replace(temporary, path)
        except OSError:
            self.log.warning("jupyter-gpucost: the alerts' state file could not be written")
