"""The allowances the hub enforces, as the admin writes them, checked into frozen settings.

``c.GpuCostHub.user_allowances``: one allowance by user name, ``"*"`` for everyone (a
user's own entry replaces everyone's)::

    {"*": {"gpu_hours": 1, "per": "week"}, "alice": {"usd": 20, "per": "7 days"}}

``c.GpuCostHub.group_allowances``: one allowance by group name, pooled by the group's
members together, or each member's own with ``"per_member": True``::

    {"students": {"gpu_hours": 1, "start": "2026-09-07", "top_up": 1, "every": "week",
                  "cap": 2, "per_member": True}}

An allowance is in money (``"usd"``: dollars, at most six decimals) or in GPU-hours
(``"gpu_hours"``, weighted per GPU model by ``c.GpuCostHub.gpu_hour_weights``, e.g.
``{"A100-80GB": 4, "T4": 1}``; a model not named weighs 1). It is either

* **a period's**: ``"per"`` is ``"day"``, ``"week"`` (ISO weeks, from Monday 00:00),
  ``"month"`` in the hub's time zone, or ``"N days"`` (a rolling window: today and the
  N - 1 days before it); the amount is what each period may use;
* **a balance**: it holds the amount from ``"start"`` (a date, 00:00 in the hub's time
  zone) and gets ``"top_up"`` at the start of every ``"every"`` (``"day"``, ``"week"``:
  Mondays, ``"month"``: the 1st) after it, never above ``"cap"`` (a top-up only tops up
  to the cap; what was not used carries over).

Every amount is 0 or more, finite, at most 10^9; a bad value is a
:class:`~.model.HubConfigError` naming the setting and the key.

Pure: no I/O, no tornado.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Literal

from ..budgets import config_amount
from ..model import HubConfigError

USER_SETTING = "c.GpuCostHub.user_allowances"
GROUP_SETTING = "c.GpuCostHub.group_allowances"
WEIGHTS_SETTING = "c.GpuCostHub.gpu_hour_weights"
MIN_RUNTIME_SETTING = "c.GpuCostHub.allowance_min_runtime_s"
REQUESTS_SETTING = "c.GpuCostHub.allowance_requests_per_week"
EVERYONE = "*"

Unit = Literal["usd", "gpu_hours"]
UNITS: tuple[Unit, ...] = ("usd", "gpu_hours")
Calendar = Literal["day", "week", "month"]
CALENDARS: tuple[Calendar, ...] = ("day", "week", "month")
_MAX_WEIGHT = Decimal(1000)
_MAX_WINDOW_DAYS = 366
_ROLLING = re.compile(r"^\s*(\d{1,3})\s*days?\s*$")
_KEYS = frozenset({"usd", "gpu_hours", "per", "start", "top_up", "every", "cap", "per_member"})


@dataclass(frozen=True)
class Period:
    """A calendar period (``calendar``) or a rolling window of ``days`` days."""

    calendar: Calendar | None = None
    days: int = 0

    @property
    def label(self) -> str:
        return self.calendar if self.calendar is not None else f"{self.days} days"


@dataclass(frozen=True)
class TopUp:
    """A balance: ``amount`` from ``start``, ``+top_up`` every ``every``, at most ``cap``."""

    start: date
    top_up_micro: int
    every: Calendar
    cap_micro: int


@dataclass(frozen=True)
class Allowance:
    """One allowance, in micro-units of its unit (micro-dollars, micro GPU-hours)."""

    unit: Unit
    amount_micro: int
    #: a period's allowance (``None``: a balance, ``top_up`` is set)
    period: Period | None = None
    top_up: TopUp | None = None
    #: a group's allowance that each member has on their own (not pooled)
    per_member: bool = False


@dataclass(frozen=True)
class AllowanceSettings:
    """Every allowance, checked."""

    users: Mapping[str, Allowance] = field(default_factory=dict)
    groups: Mapping[str, Allowance] = field(default_factory=dict)
    #: GPU model → weight of one of its GPU-hours (a model not named: 1)
    weights: Mapping[str, Decimal] = field(default_factory=dict)
    #: a spawn is refused when what is left lasts less than this at the profile's rate
    min_runtime_s: float = 0.0
    #: requests for more one user may make in an ISO week
    requests_per_week: int = 3

    @property
    def any(self) -> bool:
        return bool(self.users or self.groups)

    def weight(self, model: str) -> Decimal:
        return self.weights.get(model, Decimal(1))


def _amount(value: object, *, setting: str, what: str) -> Decimal:
    return config_amount(
        value,
        setting=setting,
        what=what,
        negative=f"it must be 0 {what} or more",
        most=f"1,000,000,000 {what}",
    )


def to_micro(value: object, unit: Unit, *, setting: str) -> int:
    """An amount in ``unit`` as written (``1``, ``"2.5"``) → whole micro-units."""
    what = "dollars" if unit == "usd" else "GPU-hours"
    micro = _amount(value, setting=setting, what=what) * 10**6
    if micro != micro.to_integral_value():
        raise HubConfigError(f"{setting}: {value!r} has more than 6 decimals")
    return int(micro)


def _period(value: object, *, setting: str) -> Period:
    if isinstance(value, str) and value in CALENDARS:
        return Period(calendar=value)
    found = _ROLLING.match(value) if isinstance(value, str) else None
    if found is not None and 1 <= int(found.group(1)) <= _MAX_WINDOW_DAYS:
        return Period(days=int(found.group(1)))
    raise HubConfigError(
        f"{setting}: {value!r} is not a period; use 'day', 'week', 'month' or a rolling "
        f"window such as '7 days' (1 to {_MAX_WINDOW_DAYS} days)"
    )


def parse_allowance(raw: object, *, setting: str) -> Allowance:
    """One allowance entry (see the module's docstring)."""
    if not isinstance(raw, Mapping):
        raise HubConfigError(
            f"{setting}: expected a dict such as {{'gpu_hours': 1, 'per': 'week'}}; got {raw!r}"
        )
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise HubConfigError(
            f"{setting}: unknown key {unknown[0]!r}; the keys are {', '.join(sorted(_KEYS))}"
        )
    units = [u for u in UNITS if u in raw]
    if len(units) != 1:
        raise HubConfigError(
            f"{setting}: give exactly one of 'usd' (dollars) or 'gpu_hours'; got {len(units)}"
        )
    unit = units[0]
    amount = to_micro(raw[unit], unit, setting=f"{setting}[{unit!r}]")
    per_member = raw.get("per_member", False)
    if not isinstance(per_member, bool):
        raise HubConfigError(f"{setting}['per_member']: {per_member!r} is not True or False")
    balance_keys = [k for k in ("start", "top_up", "every", "cap") if k in raw]
    if "per" in raw:
        if balance_keys:
            raise HubConfigError(
                f"{setting}: 'per' (an amount each period) and {balance_keys[0]!r} (a balance "
                "topped up on a schedule) do not go together; choose one"
            )
        return Allowance(
            unit, amount, _period(raw["per"], setting=f"{setting}['per']"), None, per_member
        )
    missing = [k for k in ("start", "top_up", "every", "cap") if k not in raw]
    if missing:
        raise HubConfigError(
            f"{setting}: needs 'per' (an amount each period), or 'start', 'top_up', 'every' "
            f"and 'cap' (a balance topped up on a schedule); {missing[0]!r} is missing"
        )
    start = raw["start"]
    if isinstance(start, str):
        try:
            start = date.fromisoformat(start.strip())
        except ValueError:
            start = None
    if not isinstance(start, date):
        raise HubConfigError(
            f"{setting}['start']: {raw['start']!r} is not a date such as '2026-09-07'"
        )
    every = raw["every"]
    if every not in CALENDARS:
        raise HubConfigError(
            f"{setting}['every']: {every!r} is not 'day', 'week' (Mondays) or 'month' (the 1st)"
        )
    top_up = to_micro(raw["top_up"], unit, setting=f"{setting}['top_up']")
    cap = to_micro(raw["cap"], unit, setting=f"{setting}['cap']")
    if cap < amount:
        raise HubConfigError(
            f"{setting}['cap']: {raw['cap']!r} is below the starting amount {raw[unit]!r}"
        )
    return Allowance(unit, amount, None, TopUp(start, top_up, every, cap), per_member)


def _entries(raw: object, *, setting: str) -> dict[str, Allowance]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise HubConfigError(
            f"{setting}: expected a dict of name → allowance; got {type(raw).__name__}"
        )
    out: dict[str, Allowance] = {}
    for name, entry in raw.items():
        if not isinstance(name, str) or not name:
            raise HubConfigError(f"{setting}: {name!r} is not a name")
        out[name] = parse_allowance(entry, setting=f"{setting}[{name!r}]")
    return out


def parse_weights(raw: object, *, setting: str = WEIGHTS_SETTING) -> dict[str, Decimal]:
    """GPU model → the weight of its GPU-hour (above 0, at most 1000, 3 decimals)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise HubConfigError(
            f"{setting}: expected a dict of GPU model → weight such as "
            f"{{'A100-80GB': 4, 'T4': 1}}; got {type(raw).__name__}"
        )
    out: dict[str, Decimal] = {}
    for model, value in raw.items():
        key = f"{setting}[{model!r}]"
        if not isinstance(model, str) or not model:
            raise HubConfigError(f"{setting}: {model!r} is not a GPU model")
        weight = _amount(value, setting=key, what="GPU-hours")
        if weight == 0 or weight > _MAX_WEIGHT:
            raise HubConfigError(f"{key}: {value!r} must be above 0 and at most 1000")
        if weight * 1000 != (weight * 1000).to_integral_value():
            raise HubConfigError(f"{key}: {value!r} has more than 3 decimals")
        out[model] = weight
    return out


def parse_settings(
    users: object,
    groups: object,
    weights: object,
    min_runtime_s: object,
    requests_per_week: object = 3,
) -> AllowanceSettings:
    """Every allowance setting, checked (raises :class:`~.model.HubConfigError`)."""
    parsed_groups = _entries(groups, setting=GROUP_SETTING)
    if EVERYONE in parsed_groups:
        raise HubConfigError(
            f"{GROUP_SETTING}: {EVERYONE!r} is not a group; an allowance for everyone is "
            f"{USER_SETTING}[{EVERYONE!r}]"
        )
    if (
        isinstance(min_runtime_s, bool)
        or not isinstance(min_runtime_s, int | float)
        or not 0 <= float(min_runtime_s) <= 86_400 * 7
    ):
        raise HubConfigError(
            f"{MIN_RUNTIME_SETTING}: {min_runtime_s!r} is not seconds from 0 to 604800"
        )
    if (
        isinstance(requests_per_week, bool)
        or not isinstance(requests_per_week, int)
        or not 0 <= requests_per_week <= 100
    ):
        raise HubConfigError(
            f"{REQUESTS_SETTING}: {requests_per_week!r} is not a whole number from 0 to 100"
        )
    return AllowanceSettings(
        _entries(users, setting=USER_SETTING),
        parsed_groups,
        parse_weights(weights),
        float(min_runtime_s),
        requests_per_week,
    )
