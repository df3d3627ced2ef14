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
from datetime import datetime
from typing import Literal

#: where a single-user server finds the service (set by the spawner's environment)
ENV_HUB_URL = "GPUCOST_HUB_URL"
#: the report route, relative to the service's URL
REPORT_PATH = "api/report"
PROTOCOL_VERSION = 1

HubScope = Literal["session", "day", "month"]
HUB_SCOPES: tuple[HubScope, ...] = ("session", "day", "month")
#: the words the UI shows for where a hub budget comes from
HUB_SOURCE_LABEL = "set by your hub admin"


class ProtocolError(ValueError):
    """A report or reply that does not follow the contract; the message says what."""


@dataclass(frozen=True)
class KernelSpend:
    kernel_id: str
    name: str
    cost_micro_usd: int


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

    def to_json(self) -> dict[str, object]:
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
            kernels.append(
                KernelSpend(
                    _text(k, "kernel_id", 200),
                    _text(k, "name", 200),
                    _amount(k, "cost_micro_usd"),
                )
            )
        models_raw = doc.get("gpu_models", [])
        if not isinstance(models_raw, list) or len(models_raw) > 64:
            raise ProtocolError("gpu_models: must be a list of at most 64 names")
        models = tuple(_text({"m": m}, "m", 200) for m in models_raw)
        energy = doc.get("energy_wh")
        if energy is not None and (
            isinstance(energy, bool) or not isinstance(energy, int | float) or energy < 0
        ):
            raise ProtocolError("energy_wh: must be a number of watt-hours, 0 or more")
        cells = doc.get("cells", 0)
        if isinstance(cells, bool) or not isinstance(cells, int) or cells < 0:
            raise ProtocolError("cells: must be a whole number, 0 or more")
        return cls(
            session_id=_text(doc, "session_id", 200, empty=False),
            server_name=_text(doc, "server_name", 255),
            started=_when(doc, "started"),
            sent=_when(doc, "sent"),
            cost_micro_usd=_amount(doc, "cost_micro_usd"),
            idle_micro_usd=_amount(doc, "idle_micro_usd"),
            rate_micro_usd_per_s=_amount(doc, "rate_micro_usd_per_s"),
            energy_wh=None if energy is None else float(energy),
            cells=cells,
            kernels=tuple(kernels),
            gpu_models=models,
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

    def to_json(self) -> dict[str, object]:
        return {
            "version": PROTOCOL_VERSION,
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
        return cls(
            user=_text(doc, "user", 255, empty=False),
            session_micro_usd=_amount(doc, "session_micro_usd"),
            today_micro_usd=_amount(doc, "today_micro_usd"),
            month_micro_usd=_amount(doc, "month_micro_usd"),
            budgets=tuple(budgets),
            stop_at=stop_at,
            reason=reason,
        )


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


def _amount(doc: dict[str, object], key: str) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**15:
        raise ProtocolError(f"{key}: must be a whole number of micro-dollars, 0 or more")
    return value


def _when(doc: dict[str, object], key: str) -> datetime:
    value = doc.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"{key}: must be an ISO 8601 time with its time zone")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ProtocolError(f"{key}: {value!r} is not an ISO 8601 time") from None
    if when.tzinfo is None:
        raise ProtocolError(f"{key}: {value!r} has no time zone")
    return when
