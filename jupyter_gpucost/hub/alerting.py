"""The hub's alerts (docs/alerts.md): ``c.GpuCostHub.notify`` routes each alert to the
people in charge of it, through the tornado-free :mod:`jupyter_gpucost.alerts`.

``c.GpuCostHub.notify = {"users": {"alice": [...]}, "groups": {"ml-lab": [...]},
"admins": [...], "language": "zh_CN"}``: a group's targets are its owner's (the person
paying for it); the alerts are written in ``language`` (English when not set). A user's
budget alert (their own budget or a group's) goes to that user's targets and the owners' of
their groups (of the group whose budget it is, for a group budget), and to no one else; a
stop likewise; a refused spawn to those and the admins.

:meth:`HubAlerts.after_poll` runs in the poll's worker thread after each poll (it reads the
standings the poll just built and only queues alerts); delivery is the dispatcher's threads'.

Service layer: may import the hub's core (model) and :mod:`jupyter_gpucost.alerts`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from ..alerts.dispatch import AlertDispatcher
from ..alerts.model import (
    DEFAULT_THRESHOLDS_PCT,
    Context,
    StopReason,
    budget_crossing,
    idle_gpus,
    spend_spike,
)
from ..alerts.model import allowance_request as request_alert
from ..alerts.model import spawn_refused as refused_alert
from ..alerts.model import stopped as stopped_alert
from ..alerts.targets import Target, TargetError, parse_targets
from ..core.hub_protocol import IDLE_STOP_REASON, HubBudget
from ..core.i18n import (
    N_,
    SOURCE_LANGUAGE,
    messages_for,
    normalise,
    shipped,
    shipped_languages,
    speaking,
)
from ..core.wire import AlertsSummary
from .budgets import describe, exceeded, spawn_refusal
from .enforcer import Plan
from .model import HubConfigError, ServerRow

SETTING = "c.GpuCostHub.notify"
SECTIONS = ("users", "groups", "admins")
#: the keys besides the sections
OPTIONS = ("language",)
#: why a server stopped for its budget, when the spent budget is no longer known
BUDGET_SPENT = N_("A budget is spent.")


@dataclass(frozen=True)
class HubNotify:
    users: Mapping[str, tuple[Target, ...]] = field(default_factory=dict)
    #: a group's owner's targets
    groups: Mapping[str, tuple[Target, ...]] = field(default_factory=dict)
    admins: tuple[Target, ...] = ()
    thresholds_pct: tuple[int, ...] = DEFAULT_THRESHOLDS_PCT
    #: a day's spend above this x the user's median day is alerted (0: never)
    spike_factor: float = 3.0
    #: the language the alerts are written in
    language: str = SOURCE_LANGUAGE

    @property
    def empty(self) -> bool:
        return not (self.users or self.groups or self.admins)


def _named(raw: object, section: str) -> dict[str, tuple[Target, ...]]:
    if not isinstance(raw, Mapping):
        raise HubConfigError(f'{SETTING}["{section}"] must be a dict of name -> list of URLs')
    out = {}
    for name, urls in raw.items():
        if not isinstance(name, str) or isinstance(urls, str) or not isinstance(urls, Iterable):
            raise HubConfigError(f'{SETTING}["{section}"] must map each name to a list of URLs')
        out[name] = parse_targets(urls, f'{SETTING}["{section}"][{name!r}]')
    return out


def parse_notify(
    raw: object,
    thresholds_pct: Sequence[int] = DEFAULT_THRESHOLDS_PCT,
    spike_factor: float = 3.0,
) -> HubNotify:
    """``c.GpuCostHub.notify`` checked; :class:`HubConfigError` names the setting (and the
    target masked, never its URL)."""
    if raw is None or raw == {}:
        return HubNotify(thresholds_pct=tuple(thresholds_pct), spike_factor=spike_factor)
    if not isinstance(raw, Mapping) or set(raw) - set(SECTIONS) - set(OPTIONS):
        raise HubConfigError(
            f"{SETTING} must be a dict with the keys users, groups, admins (and language)"
        )
    language = raw.get("language", SOURCE_LANGUAGE)
    if not isinstance(language, str) or not shipped(language):
        raise HubConfigError(
            f'{SETTING}["language"] must be a language the alerts are written in: '
            f"{', '.join(shipped_languages())} (not {language!r})"
        )
    try:
        admins = raw.get("admins", [])
        if isinstance(admins, str) or not isinstance(admins, Iterable):
            raise HubConfigError(f'{SETTING}["admins"] must be a list of URLs')
        return HubNotify(
            users=_named(raw.get("users", {}), "users"),
            groups=_named(raw.get("groups", {}), "groups"),
            admins=parse_targets(admins, f'{SETTING}["admins"]'),
            thresholds_pct=tuple(thresholds_pct),
            spike_factor=spike_factor,
            language=normalise(language),
        )
    except TargetError as e:
        raise HubConfigError(str(e)) from None


def _unique(targets: Iterable[Target]) -> tuple[Target, ...]:
    return tuple({t.url: t for t in targets}.values())


class HubAlerts:
    def __init__(
        self,
        notify: HubNotify,
        dispatcher: AlertDispatcher,
        *,
        tz: ZoneInfo,
        currency: str = "USD",
        symbol: str = "$",
        link: str = "",
    ) -> None:
        self.notify = notify
        self.dispatcher = dispatcher
        self.tz = tz
        self.currency = currency
        self.symbol = symbol
        self.link = link

    def people_in_charge(self, user: str, groups: Iterable[str]) -> tuple[Target, ...]:
        """``user``'s targets and the owners' of ``groups``: no one else's."""
        n = self.notify
        return _unique(
            [*n.users.get(user, ()), *(t for g in sorted(set(groups)) for t in n.groups.get(g, ()))]
        )

    def _context(self, row: ServerRow, group: str = "") -> Context:
        return Context(
            user=row.user,
            server=row.server_name or "",
            currency=self.currency,
            symbol=self.symbol,
            link=self.link,
            group=group,
        )

    def _period(self, budget: HubBudget, row: ServerRow, now: datetime) -> str:
        if budget.scope == "session":
            return f"server-{row.server_id}"
        day = now.astimezone(self.tz).date().isoformat()
        return day if budget.scope == "day" else day[:7]

    def after_poll(
        self,
        standings: Iterable[tuple[ServerRow, Sequence[HubBudget]]],
        groups_of: Mapping[str, tuple[str, ...]],
        now: datetime,
    ) -> int:
        """Each budget's highest threshold reached on each running server, queued once
        per budget, period and threshold; how many were queued."""
        queued = 0
        for row, budgets in standings:
            for budget in budgets:
                group = budget.source.partition(":")[2] if budget.source != "user" else ""
                targets = self.people_in_charge(
                    row.user, (group,) if group else groups_of.get(row.user, ())
                )
                if not targets:
                    continue
                subject = f"{budget.source}:{budget.scope}:{self._period(budget, row, now)}"
                with speaking(self.notify.language):
                    alert = budget_crossing(
                        self._context(row, group),
                        subject,
                        budget.spent_micro_usd,
                        budget.amount_micro_usd,
                        self.notify.thresholds_pct,
                        at=now,
                    )
                if alert is not None:
                    queued += self.dispatcher.submit(alert, targets)
        return queued

    def stopped(
        self,
        row: ServerRow,
        reason: StopReason,
        spent: Sequence[HubBudget],
        groups: Iterable[str],
        now: datetime,
        plan: Plan | None = None,
    ) -> bool:
        """The service asked the Hub to stop ``row`` (the machine stops billing with it):
        because of the ``spent`` budgets, or its idle GPUs (``spent`` empty). ``plan``: the
        countdown to the budget, said as the user was told it (when and at what rate the
        stop lands at the budget, and why the countdown was shortened where it was)."""
        with speaking(self.notify.language) as language:
            words = messages_for(language)
            if reason == "budget" and plan is not None:
                why = plan.sentence(words, self.symbol)
            elif reason == "budget" and spent:
                why = " ".join(describe(b, words, self.symbol) for b in spent)
            elif reason == "budget":
                why = words.gettext(BUDGET_SPENT)
            else:
                why = words.gettext(IDLE_STOP_REASON)
            alert = stopped_alert(
                self._context(row),
                reason,
                why,
                still_bills_per_hour=None,
                subject=f"server-{row.server_id}",
                at=now,
            )
        return self.dispatcher.submit(alert, self.people_in_charge(row.user, groups))

    def idle(
        self,
        row: ServerRow,
        since: datetime,
        groups: Iterable[str],
        now: datetime,
    ) -> bool:
        """The idle policy warned ``row`` (its GPUs idle since ``since``; stopped unless
        used again): once per idle spell."""
        minutes = round((now - since).total_seconds() / 60)
        with speaking(self.notify.language):
            alert = idle_gpus(
                self._context(row),
                minutes,
                subject=f"server-{row.server_id}:{since.isoformat()}",
                at=now,
            )
        return self.dispatcher.submit(alert, self.people_in_charge(row.user, groups))

    def spawn_refused(
        self, user: str, groups: Iterable[str], budgets: Sequence[HubBudget], now: datetime
    ) -> bool:
        """A spawn refused because of ``budgets``: once a day per user and spent budget,
        to them, their groups' owners and the admins."""
        context = Context(user=user, currency=self.currency, symbol=self.symbol, link=self.link)
        day = now.astimezone(self.tz).date().isoformat()
        # the event is which budgets are spent, never the sentence: its amounts move with
        # every cent spent during a grace period
        spent = sorted({f"{b.source}:{b.scope}" for b in exceeded(budgets) if b.scope != "session"})
        subject = f"{day}:{','.join(spent)}"
        with speaking(self.notify.language) as language:
            reason = spawn_refusal(budgets, messages_for(language), self.symbol)
            if reason is None:
                return False
            alert = refused_alert(context, reason, subject=subject, at=now)
        targets = _unique([*self.people_in_charge(user, groups), *self.notify.admins])
        return self.dispatcher.submit(alert, targets)

    def allowance_requested(
        self, user: str, source: str, request_id: int, amount: str, reason: str, now: datetime
    ) -> bool:
        """A request for more of ``source`` ("user", "group:<name>"): once, to the owners
        of the group whose allowance it is and the admins (never to other users)."""
        group = source.partition(":")[2]
        context = Context(
            user=user, currency=self.currency, symbol=self.symbol, link=self.link, group=group
        )
        with speaking(self.notify.language):
            alert = request_alert(context, amount, reason, subject=f"request:{request_id}", at=now)
        owners = self.notify.groups.get(group, ()) if group else ()
        return self.dispatcher.submit(alert, _unique([*owners, *self.notify.admins]))

    def spikes(
        self,
        daily: Iterable[tuple[date, str, int]],
        groups_of: Mapping[str, tuple[str, ...]],
        now: datetime,
    ) -> int:
        """Each user whose spend today is above ``spike_factor`` x the median of their
        days with spend in the last 14 (at least 3 of them): once a day. ``daily`` is the
        ledger's ``(day, user, micro-dollars)`` from 14 days ago; how many were queued."""
        factor = self.notify.spike_factor
        if factor <= 0:
            return 0
        today = now.astimezone(self.tz).date()
        first = today - timedelta(days=14)
        per_user: dict[str, tuple[int, list[int]]] = {}
        for day, user, micro in daily:
            if day < first or micro <= 0:
                continue
            today_micro, earlier = per_user.get(user, (0, []))
            if day == today:
                per_user[user] = (today_micro + micro, earlier)
            elif day < today:
                per_user[user] = (today_micro, [*earlier, micro])
        queued = 0
        for user, (today_micro, earlier) in sorted(per_user.items()):
            targets = self.people_in_charge(user, groups_of.get(user, ()))
            if not targets or not today_micro:
                continue
            context = Context(user=user, currency=self.currency, symbol=self.symbol, link=self.link)
            with speaking(self.notify.language):
                alert = spend_spike(
                    context, today.isoformat(), today_micro, earlier, factor, at=now
                )
            if alert is not None:
                queued += self.dispatcher.submit(alert, targets)
        return queued

    def page(self) -> AlertsSummary:
        """The admin page's: the latest deliveries and the failed ones (targets masked)."""
        return {"recent": self.dispatcher.recent(), "failed": self.dispatcher.failed()}
