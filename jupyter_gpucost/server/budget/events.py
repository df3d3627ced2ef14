"""Budget events: pushed on jupyter_server's event bus (the browser listens on
``/api/events/subscribe``), logged, and the latest kept for the API."""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

EVENT_SCHEMA_ID = "https://events.jupyter-gpucost.org/budget/v1"
EVENT_SCHEMA_PATH = Path(__file__).with_name("event.yaml")
#: events kept for the API
KEPT = 20

#: who else hears each event (the alerts): ``(kind, message, fields)``, on the event loop
Listener = Callable[[str, str, Mapping[str, Any]], None]


def iso(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(UTC).isoformat().replace("+00:00", "Z")


class EventLogger(Protocol):
    """What the budget needs of jupyter_server's event logger."""

    @property
    def schemas(self) -> Container[str]: ...

    def register_event_schema(self, schema: Path) -> None: ...

    def emit(self, *, schema_id: str, data: dict[str, Any]) -> object: ...


class BudgetEvents:
    def __init__(
        self,
        event_logger: EventLogger | None,
        log: logging.Logger,
        clock: Callable[[], datetime],
    ) -> None:
        self.event_logger = event_logger
        self.log = log
        self.clock = clock
        #: the latest events, oldest first, each with its time (``at``)
        self.recent: list[dict[str, Any]] = []
        self.listeners: list[Listener] = []

    def register(self) -> None:
        if self.event_logger is not None and EVENT_SCHEMA_ID not in self.event_logger.schemas:
            self.event_logger.register_event_schema(EVENT_SCHEMA_PATH)

    def emit(self, kind: str, message: str, fields: Mapping[str, Any] | None = None) -> None:
        data = {"kind": kind, "message": message, **(fields or {})}
        self.log.info("jupyter-gpucost: budget %s: %s", kind, message)
        self.recent = [*self.recent[-(KEPT - 1) :], {"at": iso(self.clock()), **data}]
        for listener in self.listeners:
            try:
                listener(kind, message, data)
            except Exception:
                self.log.exception("jupyter-gpucost: a budget event's listener failed")
        if self.event_logger is None:
            return
        try:
            self.event_logger.emit(schema_id=EVENT_SCHEMA_ID, data=data)
        except Exception:
            self.log.exception("jupyter-gpucost: could not emit the budget event")
