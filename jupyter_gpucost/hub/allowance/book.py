"""The allowances of the users with running servers after each poll, and the questions the
service asks of them: the countdown's inputs for a server (:mod:`.enforcer`), whether a
profile may start, what is left of each.

Each poll reads each running user's allowances from the hub ledger once
(:meth:`AllowanceBook.refresh`, in the poll's worker thread) and puts the new standings in
place whole: pages and reports read the last poll's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from decimal import Decimal

from ...core.hub_protocol import MAX_ALLOWANCE_MICRO, HubAllowance
from ...core.i18n import Messages
from ..enforcer import Weighed
from ..model import Rate, ServerRow
from . import words as allowance_words
from .config import AllowanceSettings, Unit
from .usage import AllowancePolicy, AllowanceStanding, Grants, UsageSource


@dataclass(frozen=True)
class ProfileLeft:
    """What is left of one allowance for a profile at its rate."""

    standing: AllowanceStanding
    per_hour: Decimal
    #: how long what is left lasts at that rate (``inf``: the profile does not use it)
    seconds: float
    #: why the profile may not start on it (``None``: it may)
    refusal: str | None


class AllowanceBook:
    """Every running user's allowances (last poll), and their rates."""

    def __init__(self, policy: AllowancePolicy) -> None:
        self.policy = policy
        self.tz: tzinfo = policy.tz
        self.standings: dict[str, list[AllowanceStanding]] = {}
        #: what owners approved on top (the ledger's requests; None: none are kept)
        self.grants: Grants | None = None
        #: (user or "group:<name>", unit) → what their running servers use per hour
        self.rates: dict[tuple[str, Unit], Decimal] = {}

    @classmethod
    def off(cls) -> AllowanceBook:
        """No allowances."""
        return cls(AllowancePolicy(AllowanceSettings(), UTC))

    @property
    def enabled(self) -> bool:
        return self.policy.enabled

    def members(self, groups_of: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for user, groups in groups_of.items():
            for g in groups:
                out.setdefault(g, []).append(user)
        return out

    def of_user(
        self,
        user: str,
        groups_of: Mapping[str, Sequence[str]],
        source: UsageSource,
        now: datetime,
    ) -> list[AllowanceStanding]:
        """``user``'s allowances now, read from the ledger."""
        if not self.enabled:
            return []
        groups = groups_of.get(user, ())
        return self.policy.standings(
            user, groups, self.members(groups_of), source, now, self.grants
        )

    def refresh(
        self,
        rows: Iterable[ServerRow],
        groups_of: Mapping[str, Sequence[str]],
        source: UsageSource,
        now: datetime,
    ) -> None:
        """Weigh the allowances of every user with a running server (each poll)."""
        if not self.enabled:
            return
        rows = list(rows)
        rates: dict[tuple[str, Unit], Decimal] = {}
        units: tuple[Unit, ...] = ("usd", "gpu_hours")
        for row in rows:
            for unit in units:
                per_hour = self.policy.rate_of(unit, row.rate)
                for key in [row.user, *(f"group:{g}" for g in groups_of.get(row.user, ()))]:
                    rates[(key, unit)] = rates.get((key, unit), Decimal(0)) + per_hour
        members = self.members(groups_of)
        standings = {
            user: self.policy.standings(
                user, groups_of.get(user, ()), members, source, now, self.grants
            )
            for user in sorted({row.user for row in rows})
        }
        self.rates, self.standings = rates, standings

    def reply(self, user: str) -> tuple[HubAllowance, ...]:
        """``user``'s allowances after the last poll, for their server's report."""
        return for_reply(self.standings.get(user, ()))

    def _pooled(self, user: str, s: AllowanceStanding) -> tuple[str, Unit]:
        group = s.source.partition(":")[2]
        allowance = self.policy.settings.groups.get(group)
        if s.source == "user" or allowance is None or allowance.per_member:
            return (user, s.unit)
        return (s.source, s.unit)

    def weighed(self, row: ServerRow) -> list[Weighed]:
        """The server's allowances, each with the rate it is used at now (the user's
        running servers together; a pooled group's members' together)."""
        out: list[Weighed] = []
        for s in self.standings.get(row.user, ()):
            own = self.policy.rate_of(s.unit, row.rate)
            per_hour = self.rates.get(self._pooled(row.user, s), own)
            out.append(Weighed(None, per_hour, s, self.tz))
        return out

    def for_profile(
        self,
        standings: Iterable[AllowanceStanding],
        rate: Rate | None,
        minimum_s: float | None = None,
        messages: Messages | None = None,
        symbol: str = "$",
    ) -> list[ProfileLeft]:
        """What is left of each allowance for a server at ``rate`` (a profile's;
        ``None``: no rate is known, only what is spent refuses), and whether it may start."""
        minimum = self.policy.settings.min_runtime_s if minimum_s is None else minimum_s
        out = []
        for s in standings:
            per_hour = Decimal(0) if rate is None else self.policy.rate_of(s.unit, rate)
            seconds = allowance_words.time_left_s(s, per_hour)
            refusal = allowance_words.spawn_refusal(s, per_hour, minimum, self.tz, messages, symbol)
            out.append(ProfileLeft(s, per_hour, seconds, refusal))
        return out


def for_reply(standings: Iterable[AllowanceStanding]) -> tuple[HubAllowance, ...]:
    """The allowances as the user's server is told them (what is left, never below 0)."""
    return tuple(
        HubAllowance(
            s.source,
            s.unit,
            s.label,
            min(s.amount_micro, MAX_ALLOWANCE_MICRO),
            min(max(s.left_micro, 0), MAX_ALLOWANCE_MICRO),
            s.refill_at,
        )
        for s in standings
    )


def standing_json(s: AllowanceStanding) -> dict[str, object]:
    """One allowance's figures for the pages and the user's server (units, not words)."""
    return {
        "source": s.source,
        "unit": s.unit,
        "period": s.label,
        "amount": s.amount_micro / 10**6,
        "used": s.used_micro / 10**6,
        "left": max(s.left_micro, 0) / 10**6,
        "exceeded": s.exceeded,
        "refill_at": s.refill_at.isoformat(),
        "refill": None if s.refill_micro is None else s.refill_micro / 10**6,
    }
