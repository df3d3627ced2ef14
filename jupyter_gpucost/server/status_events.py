"""The status document pushed on jupyter_server's event bus, so pages need not poll.

Every sampling interval (at most once a second) a coroutine on the server's event loop
builds the status document, the same one ``GET /gpucost/api/status`` answers (through
``CostService.status``: in-memory reads of the sampler's latest snapshot, never NVML), and
emits it as a ``https://events.jupyter-gpucost.org/status/v1`` event. Every page connected
to ``/api/events/subscribe`` receives it.

Throttled: when nothing but the clock fields changed (``as_of``, ``elapsed_s``,
``samples``), the document is sent again only every ``heartbeat_s`` seconds, so that pages
still know the bus is alive; when no one listens, nothing is built at all.

The cost panel's live parts travel the same way, as
``https://events.jupyter-gpucost.org/panel/v1`` events: the kernels (``GET
/gpucost/api/kernels``), this session's newest cells, the export jobs (``GET
/gpucost/api/exports``) and the chart's newest point, all read from memory, so that an open
panel needs no poll. The panel asks the server only for what memory does not hold: a
history window when it opens or changes, and earlier sessions' cells.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ..core.wire import HistoryPoint, KernelsDocument, PanelDocument, StatusDocument

STATUS_EVENT_SCHEMA_ID = "https://events.jupyter-gpucost.org/status/v1"
STATUS_EVENT_SCHEMA_PATH = Path(__file__).with_name("status_event.yaml")
PANEL_EVENT_SCHEMA_ID = "https://events.jupyter-gpucost.org/panel/v1"
PANEL_EVENT_SCHEMA_PATH = Path(__file__).with_name("panel_event.yaml")
#: the newest cells of this session a panel event carries (the panel lists 20)
PANEL_CELLS = 20

#: the shortest time between two events, in seconds, whatever the sampling interval
MIN_PERIOD_S = 1.0
#: an unchanged status is sent again after this many seconds
HEARTBEAT_S = 10.0
#: fields that change at every sample on their own: not a change worth sending
CLOCK_FIELDS = frozenset({"as_of", "elapsed_s", "samples"})

log = logging.getLogger(__name__)


def listeners(event_logger: Any, schema_id: str = STATUS_EVENT_SCHEMA_ID) -> int:
    """How many listeners receive ``schema_id``'s events (each page's event socket is one)."""
    found: set[Any] = set()
    for name in ("_modified_listeners", "_unmodified_listeners"):
        table = getattr(event_logger, name, None)
        if isinstance(table, dict):
            found.update(table.get(schema_id, ()))
    return len(found)


def without_clock(status: Mapping[str, object]) -> dict[str, object]:
    """The status less the fields that change on their own at every sample."""
    return {k: v for k, v in status.items() if k not in CLOCK_FIELDS}


class PanelSource(Protocol):
    """What the panel event reads: in-memory values only (``CostService``)."""

    def kernels(self) -> KernelsDocument: ...

    def newest_point(self) -> HistoryPoint | None: ...

    def session_cells(self, limit: int) -> list[dict[str, object]]: ...


class LiveSource(PanelSource, Protocol):
    """The status and the panel's live parts (``CostService``)."""

    def status(self) -> StatusDocument: ...


class ExportsSource(Protocol):
    def payload(self) -> dict[str, object]: ...


def panel_document(source: PanelSource, exports: ExportsSource | None) -> PanelDocument:
    """The panel's live parts, as their routes answer them (``exports``: ``None`` when the
    server runs no export manager)."""
    return {
        "kernels": source.kernels(),
        "cells": source.session_cells(PANEL_CELLS),
        "exports": None if exports is None else exports.payload(),
        "point": source.newest_point(),
    }


class StatusPublisher:
    """Emits the status on the event bus at the sampling cadence, throttled.

    ``status`` builds the document (``CostService.status``); ``emit`` sends one event's
    data; ``audience`` says how many listen (0: nothing is built). All on the event loop.
    ``key`` names the document in the event's data (``status``, or ``panel``).
    """

    def __init__(
        self,
        status: Callable[[], Mapping[str, object]],
        emit: Callable[[dict[str, object]], None],
        *,
        interval_s: float,
        audience: Callable[[], int] = lambda: 1,
        heartbeat_s: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
        key: str = "status",
    ) -> None:
        self.key = key
        self.status = status
        self.emit = emit
        self.period_s = max(float(interval_s), MIN_PERIOD_S)
        self.audience = audience
        self.heartbeat_s = max(float(heartbeat_s), self.period_s)
        self.clock = clock
        self.published = 0
        self._last: dict[str, object] | None = None
        self._last_at = float("-inf")
        self._listening = 0
        self._task: asyncio.Task[None] | None = None

    def tick(self) -> bool:
        """One step: build and emit the status if someone listens and it is due."""
        listening = self.audience()
        joined = listening > self._listening
        self._listening = listening
        if listening <= 0:
            self._last = None
            return False
        status = self.status()
        comparable = without_clock(status)
        now = self.clock()
        due = now - self._last_at >= self.heartbeat_s
        if not joined and not due and comparable == self._last:
            return False
        self.emit(
            {
                self.key: status,
                "interval_s": self.period_s,
                "heartbeat_s": self.heartbeat_s,
            }
        )
        self._last = comparable
        self._last_at = now
        self.published += 1
        return True

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_event_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            try:
                self.tick()
            except Exception:
                log.exception("jupyter-gpucost: could not publish the status")
            await asyncio.sleep(self.period_s)


def start_status_events(
    event_logger: Any,
    status: Callable[[], Mapping[str, object]],
    interval_s: float,
    *,
    schema: tuple[str, Path] = (STATUS_EVENT_SCHEMA_ID, STATUS_EVENT_SCHEMA_PATH),
    key: str = "status",
) -> StatusPublisher | None:
    """Register the event's schema and start publishing ``status`` (``None``: no event
    bus); ``schema``: its id and file, the status's by default."""
    if event_logger is None:
        return None
    schema_id, schema_path = schema
    if schema_id not in event_logger.schemas:
        event_logger.register_event_schema(schema_path)

    def emit(data: dict[str, object]) -> None:
        event_logger.emit(schema_id=schema_id, data=data)

    publisher = StatusPublisher(
        status,
        emit,
        interval_s=interval_s,
        audience=lambda: listeners(event_logger, schema_id),
        key=key,
    )
    publisher.start()
    return publisher


def start_live_events(
    event_logger: Any, source: LiveSource, exports: ExportsSource | None, interval_s: float
) -> list[StatusPublisher]:
    """Publish the status and the panel's live parts (:func:`panel_document`); none
    without an event bus."""
    status = start_status_events(event_logger, source.status, interval_s)
    panel = start_status_events(
        event_logger,
        lambda: panel_document(source, exports),
        interval_s,
        schema=(PANEL_EVENT_SCHEMA_ID, PANEL_EVENT_SCHEMA_PATH),
        key="panel",
    )
    return [p for p in (status, panel) if p is not None]


__all__ = [
    "HEARTBEAT_S",
    "PANEL_EVENT_SCHEMA_ID",
    "STATUS_EVENT_SCHEMA_ID",
    "StatusPublisher",
    "listeners",
    "panel_document",
    "start_live_events",
    "start_status_events",
]
