"""The hub tier's shared types: a server as the Hub reports it, what it was allocated, a
user's totals, and the ledger's interface. Pure: no I/O, no tornado.

The service (:mod:`jupyter_gpucost.hub.service`) meets the ledger
(:mod:`jupyter_gpucost.hub.ledger`), the allocation policy
(:mod:`jupyter_gpucost.hub.allocation`) and the budgets (:mod:`jupyter_gpucost.hub.budgets`)
only through these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import Protocol

from ..core.hub_protocol import SpendReport


class HubConfigError(ValueError):
    """A setting of the service that cannot be used; the message names the setting."""


@dataclass(frozen=True)
class ServerInfo:
    """One server as the Hub API reports it (``GET /users?state=active``)."""

    user: str
    #: "" for the user's default server
    server_name: str
    started: datetime
    ready: bool
    #: the profile the user chose (``user_options["profile"]``), if any
    profile: str | None = None
    user_options: Mapping[str, object] = field(default_factory=dict)
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuAllocation:
    """What a server was given: a GPU model (a catalog model name) and how many."""

    model: str
    count: int
    #: the fraction of one ``model`` GPU each counted device is: a MIG slice's compute
    #: slices (1/7), a GPU time-sliced N ways (1/N); 1 for whole GPUs
    share: Fraction = Fraction(1)
    #: what the share is (``MIG 1g.5gb``, ``time-sliced 4 ways``); "" for whole GPUs
    detail: str = ""
    #: the instance type the pod has a share of, and how many GPUs it has ("", 0: none)
    instance: str = ""
    instance_gpus: int = 0


@dataclass(frozen=True)
class Rate:
    """The price of one server's allocation, and where each figure comes from."""

    allocation: GpuAllocation
    usd_per_gpu_hour: Decimal
    #: a sentence: which catalog row or admin override
    source: str

    @cached_property
    def usd_per_hour(self) -> Decimal:
        # computed once: every running server's bill is priced from it each poll and with
        # each report (the one Decimal, so its hash in the price cache is computed once)
        return self.usd_per_gpu_hour * self.allocation.count


@dataclass(frozen=True)
class ReportCeiling:
    """The most a server's reports can bill: what its GPUs could physically cost.

    A server reports what it says it spent; the hub bills ``max(allocation, report)``, but
    a report counts only up to this ceiling: ``max_gpus`` GPUs (or the allocation's count,
    if larger) at the dearest price per GPU-hour in force (or the allocation's, if dearer),
    over the server's time since the Hub started it, under the billing rule.
    """

    #: the most GPUs one server can have on this hub (a node's GPUs)
    max_gpus: int = 8
    #: the dearest price per GPU-hour the hub's catalog and overrides name
    usd_per_gpu_hour: Decimal = Decimal(0)

    def rate(self, allocated: Rate) -> Rate:
        """The ceiling's rate for a server with ``allocated`` (never below it)."""
        return Rate(
            GpuAllocation(
                allocated.allocation.model, max(self.max_gpus, allocated.allocation.count)
            ),
            max(self.usd_per_gpu_hour, allocated.usd_per_gpu_hour),
            "the most the server's GPUs could cost",
        )


@dataclass(frozen=True)
class ServerRow:
    """A server's session as the hub ledger keeps it."""

    server_id: int
    user: str
    server_name: str
    started: datetime
    stopped: datetime | None
    #: last time the service saw it running (flushed); the bill of a server that stopped
    #: while the service was down ends here
    last_seen: datetime
    profile: str | None
    rate: Rate


@dataclass(frozen=True)
class InterruptionTotals:
    """A user's spot interruptions over a period, as their servers reported them
    (informational: never part of the bill)."""

    count: int = 0
    #: what was computed since each one's last checkpoint and so lost
    lost_micro_usd: int = 0


@dataclass(frozen=True)
class UserTotals:
    """A user's bill as the hub keeps it: ``max(allocated, reported)`` per server and day."""

    user: str
    today_micro_usd: int
    month_micro_usd: int
    #: the running servers' sessions, by server_id
    sessions_micro_usd: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupTotals:
    """A group's pooled bill: the sum of its members' :class:`UserTotals`."""

    group: str
    today_micro_usd: int
    month_micro_usd: int


def pooled(
    groups: Mapping[str, Iterable[str]], totals: Mapping[str, UserTotals]
) -> dict[str, GroupTotals]:
    """Each group's pooled today / this month: the sum of its members' ``totals`` (a member
    named twice counts once; one missing from ``totals`` has spent nothing)."""
    out: dict[str, GroupTotals] = {}
    for group, users in groups.items():
        found = [totals[u] for u in set(users) if u in totals]
        out[group] = GroupTotals(
            group,
            sum(t.today_micro_usd for t in found),
            sum(t.month_micro_usd for t in found),
        )
    return out


class HubClient(Protocol):
    """The Hub API calls the loop makes (:class:`jupyter_gpucost.hub.web.hubapi.HubApi`)."""

    async def active_servers(self) -> list[ServerInfo]: ...

    async def groups_of_users(self) -> dict[str, tuple[str, ...]]: ...

    async def stop_server(self, user: str, server_name: str) -> str: ...

    async def stopped_at(self, user: str, server_name: str) -> datetime | None:
        """When the Hub says this (stopped) server stopped; ``None`` when it does not."""


class HubLedgerDown(Exception):
    """The hub ledger's database cannot be reached just now (a spell: never bad data); what
    was to be written is kept in memory and written when it can be."""


class HubLedgerApi(Protocol):
    """What the service asks of the hub ledger (SQLite or any SQLAlchemy URL)."""

    def open_server(self, server: ServerInfo, rate: Rate) -> ServerRow:
        """The ledger's row for this server's current session (started at
        ``server.started``), created on first sight; the same row when seen again."""

    def close_server(self, server_id: int, stopped: datetime) -> None: ...

    def unreachable_since(self) -> datetime | None:
        """Since when the ledger's database cannot be reached (``None``: it can); billing,
        budgets and stops go on from memory meanwhile."""

    def running(self) -> list[ServerRow]:
        """Servers the ledger believes are running (not stopped)."""

    def add_report(self, server_id: int, report: SpendReport, received: datetime) -> None:
        """Keep a server's report (in memory until :meth:`flush`); a report can raise what
        was reported, up to the :class:`ReportCeiling`, never lower the bill below the
        allocation."""

    def flush(self, now: datetime) -> None:
        """Write what is pending: each running server's allocation up to ``now`` and its
        latest report, split by day. At most one flush period is lost on a crash."""

    def totals(self, user: str, now: datetime) -> UserTotals: ...

    def interruptions_by_user(self, since: date) -> dict[str, InterruptionTotals]:
        """Each user's reported spot interruptions from the local day ``since`` on (each
        id once)."""

    def all_totals(self, now: datetime) -> dict[str, UserTotals]:
        """Every user with spend this month (the admin page; fast for 1,000 users)."""

    def group_totals(
        self, groups: Mapping[str, Iterable[str]], now: datetime
    ) -> dict[str, GroupTotals]:
        """Each group's pooled today / this month (group name → its members' names)."""

    def daily(
        self, since: date, user: str | None = None, now: datetime | None = None
    ) -> list[tuple[date, str, int]]:
        """(day, user, micro-dollars) rows from ``since``; one user's or everyone's; as of
        the last flush, or up to ``now`` when it is given."""

    def spans(self, users: Iterable[str], since: datetime, now: datetime) -> list[ServerRow]:
        """The server sessions of ``users`` that ran after ``since`` (a running one's stop
        is ``None``): what allowances in GPU-hours count."""

    def sessions(
        self, user: str, limit: int = 50, now: datetime | None = None
    ) -> list[dict[str, object]]:
        """A user's server sessions, newest first (start, stop, profile, GPUs, bill); the
        running ones as of the last flush, or up to ``now`` when it is given."""

    def save_deadline(
        self, server_id: int, since: datetime, stop_at: datetime, reason: str
    ) -> None:
        """Keep a server's grace deadline across restarts of the service."""

    def clear_deadline(self, server_id: int) -> None: ...

    def deadlines(self) -> dict[int, tuple[datetime, datetime, str]]:
        """server_id → (since, stop_at, reason) of every kept grace deadline."""

    def close(self) -> None: ...
