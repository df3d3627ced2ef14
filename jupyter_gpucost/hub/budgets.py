"""The budgets the hub enforces: per user and per group, for a session, a day, a month.

``c.GpuCostHub.user_budgets``: amounts in dollars by user name, ``"*"`` for everyone::

    {"*": {"session": 5, "day": 20, "month": 200}, "alice": {"month": 500, "session": None}}

A user's own entry replaces the ``"*"`` amounts scope by scope (alice: session none, day
20, month 500). Or a callable ``f(user, groups) -> {"day": 20, ...} | None`` (``None``: no
budget), called on every check.

``c.GpuCostHub.group_budgets``: amounts by group name (``{"students": {"month": 1000}}``)
or a callable ``f(group) -> amounts | None``. A group's day and month budgets are on the
group's pooled spend (all its members together); its session budget caps each member's
session on its own (a "pooled session" means nothing).

Amounts are dollars (a number or its text, at most six decimals, 0 or more) and become
whole micro-dollars here; a bad one is a :class:`~.model.HubConfigError` naming the
setting, the key and the scope. A budget of 0 is spent at once.

Pure: no I/O, no tornado.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal, InvalidOperation

from ..core import budget_words
from ..core.hub_protocol import HUB_SCOPES, HUB_SOURCE_LABEL, HubBudget, HubScope
from ..core.i18n import Messages, messages_for
from ..core.money import MICRO_PER_UNIT, notice, rate, status_bar, to_units
from ..core.wording import period, scope_word
from .model import GroupTotals, HubConfigError, UserTotals

USER_SETTING = "c.GpuCostHub.user_budgets"
GROUP_SETTING = "c.GpuCostHub.group_budgets"
EVERYONE = "*"

#: scope → micro-dollars; a scope set to ``None`` has no budget (it overrides ``"*"``)
Amounts = dict[HubScope, int | None]
_MAX_USD = Decimal(10**9)


def config_amount(value: object, *, setting: str, what: str, negative: str, most: str) -> Decimal:
    """A non-negative, finite amount as the admin wrote it (``20``, ``"2.50"``, ``0.1``), at
    most 10^9 of ``what`` (``dollars``, ``GPU-hours``); :class:`HubConfigError` naming
    ``setting``, with ``negative`` and ``most`` the words of those two refusals."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise HubConfigError(f"{setting}: {value!r} is not a number of {what}")
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise HubConfigError(f"{setting}: {value!r} is not a number of {what}") from None
    if not amount.is_finite():
        raise HubConfigError(f"{setting}: {value!r} is not a finite number of {what}")
    if amount < 0:
        raise HubConfigError(f"{setting}: {value!r} is negative; {negative}")
    if amount > _MAX_USD:
        raise HubConfigError(f"{setting}: {value!r} is more than {most}")
    return amount


def to_micro_usd(value: object, *, setting: str) -> int:
    """Dollars as the admin wrote them (``20``, ``"2.50"``, ``0.1``) → whole micro-dollars."""
    amount = config_amount(
        value,
        setting=setting,
        what="dollars",
        negative="a budget is 0 dollars or more",
        most="$1,000,000,000",
    )
    micro = amount * MICRO_PER_UNIT
    if micro != micro.to_integral_value():
        raise HubConfigError(f"{setting}: {value!r} has more than 6 decimals (micro-dollars)")
    return int(micro)


def parse_amounts(raw: object, *, setting: str) -> Amounts:
    """One entry: ``{"session": 5, "day": 20, "month": None}`` → micro-dollars by scope."""
    if not isinstance(raw, Mapping):
        raise HubConfigError(
            f"{setting}: expected a dict of scope → dollars such as "
            f"{{'day': 20, 'month': 200}}; got {raw!r}"
        )
    out: Amounts = {}
    for scope, value in raw.items():
        if scope not in HUB_SCOPES:
            raise HubConfigError(
                f"{setting}: unknown scope {scope!r}; the scopes are {', '.join(HUB_SCOPES)}"
            )
        out[scope] = None if value is None else to_micro_usd(value, setting=f"{setting}[{scope!r}]")
    return out


def parse_budgets(raw: object, *, setting: str) -> dict[str, Amounts] | Callable[..., object]:
    """A budgets setting: a dict of name → amounts (each checked now), or a callable kept
    as it is (its results are checked when it is called)."""
    if raw is None:
        return {}
    if callable(raw):
        return raw
    if not isinstance(raw, Mapping):
        raise HubConfigError(
            f"{setting}: expected a dict of name → {{'session'|'day'|'month': dollars}}, or "
            f"a callable; got {type(raw).__name__}"
        )
    out: dict[str, Amounts] = {}
    for name, amounts in raw.items():
        if not isinstance(name, str) or not name:
            raise HubConfigError(f"{setting}: {name!r} is not a name")
        out[name] = parse_amounts(amounts, setting=f"{setting}[{name!r}]")
    return out


def _set(amounts: Amounts) -> dict[HubScope, int]:
    return {s: a for s in HUB_SCOPES if (a := amounts.get(s)) is not None}


class HubBudgetPolicy:
    """Which budgets apply to a user and to their groups, and where each one stands."""

    def __init__(
        self,
        user_budgets: object = None,
        group_budgets: object = None,
        *,
        user_setting: str = USER_SETTING,
        group_setting: str = GROUP_SETTING,
        log: logging.Logger | None = None,
    ) -> None:
        self.user_setting = user_setting
        self.group_setting = group_setting
        self.log = log or logging.getLogger("jupyter_gpucost.hub")
        self.users = parse_budgets(user_budgets, setting=user_setting)
        self.groups = parse_budgets(group_budgets, setting=group_setting)
        if isinstance(self.groups, dict) and EVERYONE in self.groups:
            raise HubConfigError(
                f"{group_setting}: {EVERYONE!r} is not a group; name each group (a budget "
                f"for everyone is {user_setting}[{EVERYONE!r}])"
            )
        #: the last amounts a callable gave, used when it fails later
        self._last: dict[tuple[str, str], dict[HubScope, int]] = {}

    def for_user(self, user: str, groups: Iterable[str] = ()) -> dict[HubScope, int]:
        """The user's own budgets (micro-dollars by scope)."""
        if isinstance(self.users, dict):
            merged = dict(self.users.get(EVERYONE, {}))
            merged.update(self.users.get(user, {}))
            return _set(merged)
        return self._called(
            ("user", user), self.user_setting, lambda f: f(user, tuple(groups)), user
        )

    def for_group(self, group: str) -> dict[HubScope, int]:
        """A group's budgets (micro-dollars by scope; day and month on pooled spend)."""
        if isinstance(self.groups, dict):
            return _set(self.groups.get(group, {}))
        return self._called(("group", group), self.group_setting, lambda f: f(group), group)

    def budgeted_groups(self, groups: Iterable[str]) -> list[str]:
        """Those of ``groups`` that have a budget (the ones whose totals are needed)."""
        return [g for g in sorted(set(groups)) if self.for_group(g)]

    def _called(
        self,
        key: tuple[str, str],
        setting: str,
        call: Callable[[Callable[..., object]], object],
        name: str,
    ) -> dict[HubScope, int]:
        fn = self.users if key[0] == "user" else self.groups
        assert callable(fn)
        try:
            raw = call(fn)
            amounts = (
                {} if raw is None else _set(parse_amounts(raw, setting=f"{setting}({name!r})"))
            )
        except Exception as e:
            if key in self._last:
                self.log.warning(
                    "gpucost hub: %s failed for %r (%s); its last budgets stay", setting, name, e
                )
                return self._last[key]
            if isinstance(e, HubConfigError):
                raise
            raise HubConfigError(f"{setting}({name!r}) failed: {e!r}") from e
        self._last[key] = amounts
        return amounts

    def standings(
        self,
        user: str,
        groups: Iterable[str],
        session_micro_usd: int,
        totals: UserTotals,
        group_totals: Mapping[str, GroupTotals],
    ) -> list[HubBudget]:
        """Every budget on ``user``'s server and what was spent against it: the user's own
        (source ``"user"``), then each group's (``"group:<name>"``). ``group_totals``
        needs the groups of :meth:`budgeted_groups` (a group missing counts as $0)."""
        groups = tuple(groups)
        out = [
            HubBudget(
                scope,
                amount,
                _spent(scope, session_micro_usd, totals.today_micro_usd, totals.month_micro_usd),
                "user",
            )
            for scope, amount in self.for_user(user, groups).items()
        ]
        for group in sorted(set(groups)):
            pooled = group_totals.get(group, GroupTotals(group, 0, 0))
            for scope, amount in self.for_group(group).items():
                spent = _spent(
                    scope, session_micro_usd, pooled.today_micro_usd, pooled.month_micro_usd
                )
                out.append(HubBudget(scope, amount, spent, f"group:{group}"))
        return out


def _spent(scope: HubScope, session: int, today: int, month: int) -> int:
    return {"session": session, "day": today, "month": month}[scope]


def exceeded(standings: Iterable[HubBudget]) -> list[HubBudget]:
    return [b for b in standings if b.exceeded]


def describe(budget: HubBudget, messages: Messages | None = None, symbol: str = "$") -> str:
    """A sentence for the user: ``"Your day budget of $20.00 (set by your hub admin) is
    spent: $20.41 today."``, in the language of ``messages`` (English when none: the
    Hub's own messages, its spawn refusals and the deadlines it keeps)."""
    tr = messages if messages is not None else messages_for("en")
    _ = tr.gettext  # by this name, the catalog's tool finds the sentences
    group = budget.source.partition(":")[2]
    if budget.source == "user":
        if budget.exceeded:
            text = _("Your {scope} budget of {amount} ({source}) is spent: {spent} {period}.")
        else:
            text = _("Your {scope} budget of {amount} ({source}) stands at: {spent} {period}.")
    elif budget.exceeded:
        text = _(
            "Group {group}'s {scope} budget of {amount} ({source}) is spent: {spent} {period}."
        )
    else:
        text = _(
            "Group {group}'s {scope} budget of {amount} ({source}) stands at: {spent} {period}."
        )
    return text.format(
        group=group,
        scope=scope_word(budget.scope, tr),
        amount=notice(budget.amount_micro_usd, symbol),
        source=tr.gettext(HUB_SOURCE_LABEL),
        spent=status_bar(to_units(budget.spent_micro_usd), symbol),
        period=period(budget.scope, tr),
    )


def stop_plan(
    budget: HubBudget,
    usd_per_hour: Decimal,
    countdown_s: float,
    grace_s: float,
    shortened: str | None = None,
    messages: Messages | None = None,
    symbol: str = "$",
) -> str:
    """Why and when the hub stops a server, as its countdown begins: ``"Your day budget of
    $20.00 (set by your hub admin) stands at: $19.50 today. Stops at $20.00 — in about 2 min
    at $13.72/h; notebooks saved first, then the hub stops the server."``, with why the
    countdown is shorter than the grace period where it is (English when ``messages`` is
    none: the Hub's own messages and the deadlines it keeps)."""
    tr = messages if messages is not None else messages_for("en")
    _ = tr.gettext  # by this name, the catalog's tool finds the sentences
    per_hour = rate(usd_per_hour, symbol, _("{price}/h"))
    plan = _(
        "Stops at {amount} — in about {duration} at {rate}; notebooks saved first, then the "
        "hub stops the server."
    ).format(
        amount=notice(budget.amount_micro_usd, symbol),
        duration=budget_words.about(countdown_s, tr),
        rate=per_hour,
    )
    parts = [describe(budget, tr, symbol), plan]
    if shortened is not None:
        parts.append(budget_words.shortened(shortened, grace_s, countdown_s, per_hour, tr))
    return " ".join(parts)


def spawn_refusal(
    standings: Iterable[HubBudget], messages: Messages | None = None, symbol: str = "$"
) -> str | None:
    """Why a new server may not start (a day or month budget is spent), or ``None``, in
    the language of ``messages`` (English when none). A session budget does not stop a
    spawn: the new session starts at $0."""
    spent = [b for b in exceeded(standings) if b.scope != "session"]
    if not spent:
        return None
    tr = messages if messages is not None else messages_for("en")
    _ = tr.gettext  # by this name, the catalog's tool finds the sentence
    reasons = " ".join(describe(b, tr, symbol) for b in spent)
    return _("Your server cannot start. {reasons}").format(reasons=reasons)
