"""The single-user server ↔ hub service contract: a spend report and the service's reply.

When a hub runs the gpucost service (:mod:`jupyter_gpucost.hub`), each single-user server
posts a :class:`SpendReport` every few seconds to ``{GPUCOST_HUB_URL}api/report``,
authenticated with its own hub token (``Authorization: token $JUPYTERHUB_API_TOKEN``).
The service learns who sent it from the token (through the Hub), never from the body, so a
report names no user and carries no one else's credentials. The service answers with a
:class:`HubReply`: the user's bill as the hub keeps it, the budgets the hub enforces, and,
when one is spent, when the hub will stop the server (``stop_at``).

Pure: no I/O, no tornado. Both sides encode and decode through this module only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from .i18n import N_
from .wire_report import HubReplyJson, SpendReportJson

#: where a single-user server finds the service (set by the spawner's environment)
ENV_HUB_URL = "GPUCOST_HUB_URL"
#: the report route, relative to the service's URL
REPORT_PATH = "api/report"
PROTOCOL_VERSION = 1

HubScope = Literal["session", "day", "month"]
HUB_SCOPES: tuple[HubScope, ...] = ("session", "day", "month")
#: the words the UI shows for where a hub budget comes from
HUB_SOURCE_LABEL = N_("set by your hub admin")
#: the reason of a stop for idle GPUs (the reply's ``reason``; the server translates it)
IDLE_STOP_REASON = N_(
    "Your server's GPUs have been idle with no kernel busy: the hub stops the server to "
    "free them. Run something to keep it."
)
#: why the hub stops a server (the reply's ``stop_kind``)
StopKind = Literal["budget", "idle"]
STOP_KINDS: tuple[StopKind, ...] = ("budget", "idle")

# What a report can physically say. Each bound is far above any real server (64 GPUs at
# $100 an hour for a year is $56 million) and far below what breaks a 64-bit sum: a value
# past one is a 400 naming the field, never a row in the ledger.
#: micro-dollars in one report's figure ($100 million)
MAX_REPORT_MICRO_USD = 10**14
#: micro-dollars a second (64 GPUs at $100 an hour is 1.8 million)
MAX_RATE_MICRO_USD_PER_S = 10**7
#: watt-hours (64 GPUs at 1 kW for a year is 5.6 × 10^8)
MAX_ENERGY_WH = 1e9
#: cells run in one session
MAX_CELLS = 10**9
#: microseconds of one GPU's time in one session (31 years)
MAX_GPU_US = 10**15
#: kernels of one server
MAX_KERNELS = 1000
#: how far ahead of the service's clock a report's times may be (clock skew)
MAX_CLOCK_SKEW = timedelta(minutes=10)
#: the years a report's times may fall in
YEARS = (2000, 2200)
#: spot interruptions one report carries (the server's newest; older ones were sent before)
MAX_INTERRUPTIONS = 16


class ProtocolError(ValueError):
    """A report or reply that does not follow the contract; the message says what."""


@dataclass(frozen=True)
class KernelSpend:
    kernel_id: str
    name: str
    cost_micro_usd: int


@dataclass(frozen=True)
class GpuTime:
    """One GPU's time in the session so far, as the server's meter splits it: the hub
    derives each GPU's utilisation over a window from two reports (the difference)."""

    used_us: int
    idle_us: int


@dataclass(frozen=True)
class ReportedInterruption:
    """A spot/preemptible interruption the server recorded (docs/spot.md): informational,
    never part of a bill. ``interruption_id`` is stable (the interrupted session and when),
    so the same interruption sent in every report, or again after a restart, counts once."""

    interruption_id: str
    at: datetime
    #: "aws", "gcp", "azure" or "kubernetes"
    provider: str
    #: "spot"
    market: str
    #: what was computed since the last checkpoint and so lost, in micro-dollars
    lost_micro_usd: int
    #: the interrupted session's cost, in micro-dollars
    session_micro_usd: int

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.interruption_id,
            "at": self.at.isoformat(),
            "provider": self.provider,
            "market": self.market,
            "lost_micro_usd": self.lost_micro_usd,
            "session_micro_usd": self.session_micro_usd,
        }

    @classmethod
    def from_json(cls, raw: object, what: str) -> ReportedInterruption:
        doc = _object(raw, what)
        try:
            lost = _amount(doc, "lost_micro_usd")
            session = _amount(doc, "session_micro_usd")
            if lost > session:
                raise ProtocolError("lost_micro_usd: must not be more than session_micro_usd")
            return cls(
                interruption_id=_text(doc, "id", 200, empty=False),
                at=_when(doc, "at"),
                provider=_text(doc, "provider", 32, empty=False),
                market=_text(doc, "market", 32),
                lost_micro_usd=lost,
                session_micro_usd=session,
            )
        except ProtocolError as e:
            raise ProtocolError(f"{what}.{e}") from None


@dataclass(frozen=True)
class SpendReport:
    """What one single-user server says it has spent in its current session."""

    #: the server's session (one per start of the server)
    session_id: str
    #: JUPYTERHUB_SERVER_NAME ("" for the default server)
    server_name: str
    started: datetime
    sent: datetime
    cost_micro_usd: int
    idle_micro_usd: int
    rate_micro_usd_per_s: int
    energy_wh: float | None = None
    cells: int = 0
    kernels: tuple[KernelSpend, ...] = ()
    #: GPU model names the server sees (informational: the hub bills its own allocation)
    gpu_models: tuple[str, ...] = ()
    # -- for the hub's idle policy (a server that omits them: unknown, never idle) ----
    #: kernels executing now; ``None``: the server does not say
    kernels_busy: int | None = None
    #: each GPU's used and idle time in the session so far, in the meter's GPU order
    gpu_time: tuple[GpuTime, ...] = ()
    #: the spot interruptions the server recorded, newest (a server that omits them: none)
    interruptions: tuple[ReportedInterruption, ...] = ()

    def to_json(self) -> SpendReportJson:
        return {
            "version": PROTOCOL_VERSION,
            "session_id": self.session_id,
            "server_name": self.server_name,
            "started": self.started.isoformat(),
            "sent": self.sent.isoformat(),
            "cost_micro_usd": self.cost_micro_usd,
            "idle_micro_usd": self.idle_micro_usd,
            "rate_micro_usd_per_s": self.rate_micro_usd_per_s,
            "energy_wh": self.energy_wh,
            "cells": self.cells,
            "kernels": [
                {"kernel_id": k.kernel_id, "name": k.name, "cost_micro_usd": k.cost_micro_usd}
                for k in self.kernels
            ],
            "gpu_models": list(self.gpu_models),
            "kernels_busy": self.kernels_busy,
            "gpu_time": [{"used_us": g.used_us, "idle_us": g.idle_us} for g in self.gpu_time],
            "interruptions": [i.to_json() for i in self.interruptions],
        }

    @classmethod
    def from_json(cls, body: object) -> SpendReport:
        """A report from a request body; :class:`ProtocolError` names the first bad field."""
        doc = _object(body, "report")
        _version(doc)
        kernels_raw = doc.get("kernels", [])
        if not isinstance(kernels_raw, list) or len(kernels_raw) > 1000:
            raise ProtocolError("kernels: must be a list of at most 1000 kernels")
        kernels = []
        for i, raw in enumerate(kernels_raw):
            k = _object(raw, f"kernels[{i}]")
            try:
                kernels.append(
                    KernelSpend(
                        _text(k, "kernel_id", 200),
                        _text(k, "name", 200),
                        _amount(k, "cost_micro_usd", MAX_REPORT_MICRO_USD),
                    )
                )
            except ProtocolError as e:
                raise ProtocolError(f"kernels[{i}].{e}") from None
        models_raw = doc.get("gpu_models", [])
        if not isinstance(models_raw, list) or len(models_raw) > 64:
            raise ProtocolError("gpu_models: must be a list of at most 64 names")
        models = tuple(_text({"m": m}, "m", 200) for m in models_raw)
        energy = doc.get("energy_wh")
        if energy is not None and (
            isinstance(energy, bool)
            or not isinstance(energy, int | float)
            or not 0 <= energy <= MAX_ENERGY_WH  # False for NaN
        ):
            raise ProtocolError(
                f"energy_wh: must be a finite number of watt-hours from 0 to {MAX_ENERGY_WH:.0e}"
            )
        cells = _whole(doc, "cells", MAX_CELLS, default=0)
        busy = (
            None
            if doc.get("kernels_busy") is None
            else _whole(doc, "kernels_busy", MAX_KERNELS, default=0)
        )
        gpu_time = _gpu_time(doc.get("gpu_time", []))
        interruptions = _interruptions(doc.get("interruptions", []))
        started = _when(doc, "started")
        sent = _when(doc, "sent")
        if started > sent:
            raise ProtocolError("started: must not be after sent")
        cost = _amount(doc, "cost_micro_usd", MAX_REPORT_MICRO_USD)
        idle = _amount(doc, "idle_micro_usd", MAX_REPORT_MICRO_USD)
        if idle > cost:
            raise ProtocolError("idle_micro_usd: must not be more than cost_micro_usd")
        return cls(
            session_id=_text(doc, "session_id", 200, empty=False),
            server_name=_text(doc, "server_name", 255),
            started=started,
            sent=sent,
            cost_micro_usd=cost,
            idle_micro_usd=idle,
            rate_micro_usd_per_s=_amount(doc, "rate_micro_usd_per_s", MAX_RATE_MICRO_USD_PER_S),
            energy_wh=None if energy is None else float(energy),
            cells=cells,
            kernels=tuple(kernels),
            gpu_models=models,
            kernels_busy=busy,
            gpu_time=gpu_time,
            interruptions=interruptions,
        )

    def check_times(self, now: datetime) -> None:
        """:class:`ProtocolError` when the report says it was sent in the future (beyond
        :data:`MAX_CLOCK_SKEW` of ``now``, the receiver's clock)."""
        if self.sent > now + MAX_CLOCK_SKEW:
            raise ProtocolError("sent: is in the future of the service's clock")
        for i, item in enumerate(self.interruptions):
            if item.at > now + MAX_CLOCK_SKEW:
                raise ProtocolError(
                    f"interruptions[{i}].at: is in the future of the service's clock"
                )


@dataclass(frozen=True)
class HubBudget:
    """One budget the hub enforces on this user, and where it stands."""

    scope: HubScope
    amount_micro_usd: int
    spent_micro_usd: int
    #: "user" or "group:<name>"
    source: str

    @property
    def exceeded(self) -> bool:
        return self.spent_micro_usd >= self.amount_micro_usd


#: what an allowance counts: dollars or weighted GPU-hours
ALLOWANCE_UNITS = ("usd", "gpu_hours")
#: the most an allowance may hold, in micro-units (10^9 dollars or GPU-hours)
MAX_ALLOWANCE_MICRO = 10**15


@dataclass(frozen=True)
class HubAllowance:
    """One allowance the hub enforces on this user, and what is left of it (read-only)."""

    #: "user" or "group:<name>"
    source: str
    #: one of :data:`ALLOWANCE_UNITS`
    unit: str
    #: "day", "week", "month", "N days" (a rolling window) or "balance"
    period: str
    #: a period's amount, a balance's cap; micro-dollars or micro GPU-hours
    amount_micro: int
    left_micro: int
    #: when it fills up again (the next period, the next top-up)
    refill_at: datetime

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "unit": self.unit,
            "period": self.period,
            "amount_micro": self.amount_micro,
            "left_micro": self.left_micro,
            "refill_at": self.refill_at.isoformat(),
        }

    @classmethod
    def from_json(cls, raw: object, what: str) -> HubAllowance:
        a = _object(raw, what)
        unit = a.get("unit")
        if unit not in ALLOWANCE_UNITS:
            raise ProtocolError(f"{what}.unit: must be one of {', '.join(ALLOWANCE_UNITS)}")
        return cls(
            source=_text(a, "source", 300, empty=False),
            unit=str(unit),
            period=_text(a, "period", 20, empty=False),
            amount_micro=_amount(a, "amount_micro", MAX_ALLOWANCE_MICRO),
            left_micro=_amount(a, "left_micro", MAX_ALLOWANCE_MICRO),
            refill_at=_when(a, "refill_at"),
        )


@dataclass(frozen=True)
class HubReply:
    """The service's answer to a report: the hub's bill and budgets for this user."""

    user: str
    #: this server's session as the hub bills it (never below what it allocated)
    session_micro_usd: int
    today_micro_usd: int
    month_micro_usd: int
    budgets: tuple[HubBudget, ...] = ()
    #: when the hub will stop this server (a budget is spent); None while none is
    stop_at: datetime | None = None
    reason: str | None = None
    #: why: a spent budget or idle GPUs (``None`` from a service that does not say)
    stop_kind: StopKind | None = None
    #: since when the hub's ledger cannot be reached (``None``: it can, or the service
    #: does not say); the hub bills and enforces from memory meanwhile
    ledger_unreachable_since: datetime | None = None
    #: the hub's allowances on this user (a service that has none, or an older one: none)
    allowances: tuple[HubAllowance, ...] = ()

    def to_json(self) -> HubReplyJson:
        return {
            "version": PROTOCOL_VERSION,
            "allowances": [a.to_json() for a in self.allowances],
            "user": self.user,
            "session_micro_usd": self.session_micro_usd,
            "today_micro_usd": self.today_micro_usd,
            "month_micro_usd": self.month_micro_usd,
            "budgets": [
                {
                    "scope": b.scope,
                    "amount_micro_usd": b.amount_micro_usd,
                    "spent_micro_usd": b.spent_micro_usd,
                    "source": b.source,
                }
                for b in self.budgets
            ],
            "stop_at": self.stop_at.isoformat() if self.stop_at else None,
            "reason": self.reason,
            "stop_kind": self.stop_kind,
            "ledger_unreachable_since": None
            if self.ledger_unreachable_since is None
            else self.ledger_unreachable_since.isoformat(),
        }

    @classmethod
    def from_json(cls, body: object) -> HubReply:
        doc = _object(body, "reply")
        _version(doc)
        budgets_raw = doc.get("budgets", [])
        if not isinstance(budgets_raw, list):
            raise ProtocolError("budgets: must be a list")
        budgets = []
        for i, raw in enumerate(budgets_raw):
            b = _object(raw, f"budgets[{i}]")
            scope = b.get("scope")
            if scope not in HUB_SCOPES:
                raise ProtocolError(f"budgets[{i}].scope: must be one of {', '.join(HUB_SCOPES)}")
            budgets.append(
                HubBudget(
                    scope=scope,
                    amount_micro_usd=_amount(b, "amount_micro_usd"),
                    spent_micro_usd=_amount(b, "spent_micro_usd"),
                    source=_text(b, "source", 300),
                )
            )
        stop_at = None if doc.get("stop_at") is None else _when(doc, "stop_at")
        reason = doc.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ProtocolError("reason: must be text")
        kind = doc.get("stop_kind")
        if kind is not None and kind not in STOP_KINDS:
            raise ProtocolError(f"stop_kind: must be one of {', '.join(STOP_KINDS)}")
        allowances_raw = doc.get("allowances", [])
        if not isinstance(allowances_raw, list) or len(allowances_raw) > 100:
            raise ProtocolError("allowances: must be a list of at most 100")
        return cls(
            allowances=tuple(
                HubAllowance.from_json(a, f"allowances[{i}]") for i, a in enumerate(allowances_raw)
            ),
            user=_text(doc, "user", 255, empty=False),
            session_micro_usd=_amount(doc, "session_micro_usd"),
            today_micro_usd=_amount(doc, "today_micro_usd"),
            month_micro_usd=_amount(doc, "month_micro_usd"),
            budgets=tuple(budgets),
            stop_at=stop_at,
            reason=reason,
            stop_kind=kind,
            ledger_unreachable_since=None
            if doc.get("ledger_unreachable_since") is None
            else _when(doc, "ledger_unreachable_since"),
        )


def _gpu_time(raw: object) -> tuple[GpuTime, ...]:
    if not isinstance(raw, list) or len(raw) > 64:
        raise ProtocolError("gpu_time: must be a list of at most 64 GPUs")
    out = []
    for i, item in enumerate(raw):
        g = _object(item, f"gpu_time[{i}]")
        try:
            out.append(
                GpuTime(
                    _whole(g, "used_us", MAX_GPU_US, default=-1),
                    _whole(g, "idle_us", MAX_GPU_US, default=-1),
                )
            )
        except ProtocolError as e:
            raise ProtocolError(f"gpu_time[{i}].{e}") from None
    return tuple(out)


def _interruptions(raw: object) -> tuple[ReportedInterruption, ...]:
    if not isinstance(raw, list) or len(raw) > MAX_INTERRUPTIONS:
        raise ProtocolError(
            f"interruptions: must be a list of at most {MAX_INTERRUPTIONS} interruptions"
        )
    out = [
        ReportedInterruption.from_json(item, f"interruptions[{i}]") for i, item in enumerate(raw)
    ]
    if len({i.interruption_id for i in out}) != len(out):
        raise ProtocolError("interruptions: an id is repeated")
    return tuple(out)


def _object(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{what}: must be a JSON object")
    return value


def _version(doc: dict[str, object]) -> None:
    if doc.get("version") != PROTOCOL_VERSION:
        raise ProtocolError(
            f"version: {doc.get('version')!r} is not protocol version {PROTOCOL_VERSION}"
        )


def _text(doc: dict[str, object], key: str, limit: int, *, empty: bool = True) -> str:
    value = doc.get(key, "")
    if not isinstance(value, str) or len(value) > limit or (not empty and not value):
        raise ProtocolError(f"{key}: must be text of 1 to {limit} characters")
    return value


def _amount(doc: dict[str, object], key: str, limit: int = MAX_REPORT_MICRO_USD) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ProtocolError(f"{key}: must be a whole number of micro-dollars from 0 to {limit}")
    return value


def _whole(doc: dict[str, object], key: str, limit: int, *, default: int) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ProtocolError(f"{key}: must be a whole number from 0 to {limit}")
    return value


def _when(doc: dict[str, object], key: str) -> datetime:
    value = doc.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"{key}: must be an ISO 8601 time with its time zone")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ProtocolError(f"{key}: {value[:40]!r} is not an ISO 8601 time") from None
    if when.tzinfo is None or when.utcoffset() is None:
        raise ProtocolError(f"{key}: {value!r} has no time zone")
    if not YEARS[0] <= when.year < YEARS[1]:
        raise ProtocolError(f"{key}: {value!r} is not between {YEARS[0]} and {YEARS[1]}")
    return when
