"""When the hub stops a server over budget: a grace period, then stop.

A pure state machine the service ticks with each server's exceeded budgets:

* a server that goes over any budget gets ``stop_at = now + grace``; later ticks keep that
  deadline (it is never pushed back by being over again, nor brought forward);
* it is **due** once ``now >= stop_at``; the service then stops it through the Hub API;
* it is cleared as soon as it is no longer over (the admin raised the budget, a new day
  began for a day budget), and a later excess starts a new grace.

Servers are keyed by ``(user, server_name, started)``: a server started again is a new
session with no deadline inherited from the old one.

The service keeps each deadline in its ledger and :meth:`Enforcer.restore` s them after a
restart: a restart does not give a server a new grace period. The server's own countdown
and the work it saves do not depend on this.

Pure: no I/O, no clock (``now`` is given), no tornado.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..core.hub_protocol import HubBudget
from .budgets import describe

#: (user, server_name, started)
ServerKey = tuple[str, str, datetime]


@dataclass(frozen=True)
class Deadline:
    """A server over budget, and when the hub stops it."""

    key: ServerKey
    since: datetime
    stop_at: datetime
    #: the budgets it was over when the grace began, as sentences for the user
    reason: str


class Enforcer:
    """The servers in their grace period. Not thread-safe: one loop ticks it."""

    def __init__(self, grace_s: float) -> None:
        if grace_s < 0:
            raise ValueError("the grace period must be 0 seconds or more")
        self.grace = timedelta(seconds=grace_s)
        self._deadlines: dict[ServerKey, Deadline] = {}

    def update(
        self, key: ServerKey, standings: Iterable[HubBudget], now: datetime
    ) -> Deadline | None:
        """Tick one server with its budgets' standings: its deadline, or ``None`` when it
        is within every budget (a deadline it had is cleared)."""
        over = [b for b in standings if b.exceeded]
        if not over:
            self._deadlines.pop(key, None)
            return None
        deadline = self._deadlines.get(key)
        if deadline is None:
            deadline = Deadline(key, now, now + self.grace, " ".join(describe(b) for b in over))
            self._deadlines[key] = deadline
        return deadline

    def restore(self, key: ServerKey, since: datetime, stop_at: datetime, reason: str) -> None:
        """A deadline set before a restart of the service (kept until the server is
        within its budgets again, like any other)."""
        self._deadlines[key] = Deadline(key, since, stop_at, reason)

    def deadline(self, key: ServerKey) -> Deadline | None:
        return self._deadlines.get(key)

    def due(self, now: datetime) -> list[Deadline]:
        """The servers whose grace is over, earliest first."""
        return sorted(
            (d for d in self._deadlines.values() if now >= d.stop_at), key=lambda d: d.stop_at
        )

    def forget(self, key: ServerKey) -> None:
        """The server stopped (by the hub or on its own)."""
        self._deadlines.pop(key, None)

    def keep_only(self, keys: Iterable[ServerKey]) -> None:
        """Forget every server not in ``keys`` (those the Hub no longer lists)."""
        wanted = set(keys)
        for key in [k for k in self._deadlines if k not in wanted]:
            del self._deadlines[key]

    def __len__(self) -> int:
        return len(self._deadlines)
