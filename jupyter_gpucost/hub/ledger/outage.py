"""The hub ledger while its database cannot be reached: what is known of the spell, and
what waits in memory to be written when it ends.

A spell is what :func:`~jupyter_gpucost.core.sql.is_transient` says it is (a lost or
refused connection, a timeout, a locked, full or read-only database): never bad data, so
never a quarantine. Meanwhile the service bills, weighs budgets and stops servers from
memory; what the database must learn waits here, in the order it happened, and is written
first thing when the database answers again:

* servers opened meanwhile (a provisional, negative id until they have a row);
* servers closed meanwhile (their last days, ``stopped`` and latest report);
* grace deadlines set or cleared meanwhile (the latest of each server's);
* rows refused as bad data, kept for quarantine until the quarantine can be written.

What is here is lost if the service is killed before the database comes back; the
Hub's own record of a server's stop bounds what that costs (see ``docs/ledger.md``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy.engine import Engine

from ...core.sql import Spell
from ..model import HubLedgerDown
from .state import Day, LastReport, OpenServer


@dataclass
class Closing:
    """A server closed while the database could not be reached."""

    server: OpenServer
    days: dict[date, Day]
    stopped: datetime
    last_seen: datetime
    last: LastReport


@dataclass(frozen=True)
class DeadlineChange:
    """A grace deadline to write (``None`` times: cleared)."""

    since: datetime | None = None
    stop_at: datetime | None = None
    reason: str = ""


@dataclass(frozen=True)
class QuarantinedRow:
    """A row refused as bad data, for the quarantine."""

    now_us: int
    source: str
    row: dict[str, Any]
    reason: str


class Outage:
    """The hub ledger's spell (:class:`~jupyter_gpucost.core.sql.Spell`), logged once per
    spell, as :class:`HubLedgerDown`."""

    def __init__(self, engine: Engine, log: logging.Logger) -> None:
        self.engine = engine
        self.log = log
        self.spell = Spell()

    @property
    def down_since(self) -> datetime | None:
        return self.spell.down_since

    def check(self) -> None:
        """Raise :class:`HubLedgerDown` at once while the database is down and its next
        try is not due (nothing waits on a database known to be away)."""
        if not self.spell.due():
            raise HubLedgerDown(self.spell.error or "the hub ledger cannot be reached")

    def retry_now(self) -> None:
        self.spell.retry_now()

    def failed(self, e: BaseException) -> None:
        """After ``e``: a spell raises :class:`HubLedgerDown` (fresh connections for the
        next try); any other error returns, for the caller to raise as it is."""
        if not self.spell.failed(e, self.engine):
            return
        if self.spell.failures == 1:
            self.log.error(
                "gpucost hub: the ledger cannot be reached (%s); billing, budgets and stops "
                "go on from memory, and what is not written is written when it is back",
                self.spell.error,
            )
        raise HubLedgerDown(self.spell.error) from e

    def back(self) -> None:
        since = self.spell.back()
        if since is not None:
            self.log.warning(
                "gpucost hub: the ledger is back (unreachable since %s)",
                since.isoformat(timespec="seconds"),
            )


class Waiting:
    """What the database must learn once it answers again, in memory meanwhile."""

    def __init__(self) -> None:
        #: servers opened meanwhile, by provisional id (negative)
        self.opened: dict[int, OpenServer] = {}
        #: provisional id → the id its row got
        self.alias: dict[int, int] = {}
        self._next = -1
        self.closing: dict[int, Closing] = {}
        self.deadlines: dict[int, DeadlineChange] = {}
        self.refused: list[QuarantinedRow] = []

    def provisional_id(self) -> int:
        found, self._next = self._next, self._next - 1
        return found

    def real(self, server_id: int) -> int:
        """The id a server's row has (its provisional id until it has one)."""
        return self.alias.get(server_id, server_id)

    def __bool__(self) -> bool:
        return bool(self.opened or self.closing or self.deadlines or self.refused)
