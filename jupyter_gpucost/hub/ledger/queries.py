"""What the hub ledger reads back: month and day sums per user, days for the chart,
a user's sessions, and the running servers to take up again after a restart.

Every sum of micro-dollars is taken in two parts, whole dollars and the micro-dollars
left over (:func:`_exact_sum`), and joined in Python: no 64-bit sum in the database can
overflow with any figure the ledger holds (at most
:data:`~.state.MAX_ROW_MICRO_USD` a row), on SQLite (whose ``SUM`` raises on overflow)
as on PostgreSQL.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import replace
from datetime import date
from decimal import Decimal
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..accounting import month_start
from ..model import GpuAllocation, Rate, ReportCeiling, ServerRow
from .schema import daily_table, from_us, rate_shares_table, rates_table, servers_table
from .state import Day, LastReport, OpenServer

_MICRO = 1_000_000

_d = daily_table.c
_s = servers_table.c
_r = rates_table.c
#: a server session with its rate's columns
_p = rate_shares_table.c
_with_rate = servers_table.join(rates_table, _r.id == _s.rate_id).outerjoin(
    rate_shares_table, _p.rate_id == _r.id
)
_rate_columns = (
    _r.gpu_model,
    _r.gpu_count,
    _r.usd_per_gpu_hour,
    _r.source.label("rate_source"),
    _p.share.label("gpu_share"),
    _p.detail.label("gpu_detail"),
    _p.instance.label("gpu_instance"),
    _p.instance_gpus.label("gpu_instance_gpus"),
)


def _exact_sum(value: Any, label: str) -> list[Any]:
    """The sum of ``value`` as two sums that cannot overflow: whole dollars, and the
    micro-dollars left over (:func:`_joined` puts them together)."""
    return [
        sa.func.sum(value // _MICRO).label(f"{label}_usd"),
        sa.func.sum(value % _MICRO).label(f"{label}_micro"),
    ]


def _joined(usd: Any, micro: Any) -> int:
    """The exact sum of :func:`_exact_sum`'s two parts (NULL: no rows)."""
    return int(usd or 0) * _MICRO + int(micro or 0)


def sums_by_user(
    conn: Connection, today: date, users: Collection[str] | None = None
) -> dict[str, tuple[int, int]]:
    """user → (today, this month) as flushed, for ``users`` or every user with rows."""
    on_today = sa.case((_d.day == today, _d.billed_micro_usd), else_=0)
    query = (
        sa.select(
            _d.user_name,
            *_exact_sum(on_today, "today"),
            *_exact_sum(_d.billed_micro_usd, "month"),
        )
        .where(_d.day >= month_start(today), _d.day <= today)
        .group_by(_d.user_name)
    )
    if users is not None:
        if not users:
            return {}
        query = query.where(_d.user_name.in_(sorted(users)))
    return {u: (_joined(t1, t2), _joined(m1, m2)) for u, t1, t2, m1, m2 in conn.execute(query)}


def daily_rows(conn: Connection, since: date, user: str | None) -> list[tuple[date, str, int]]:
    query = (
        sa.select(_d.day, _d.user_name, *_exact_sum(_d.billed_micro_usd, "billed"))
        .where(_d.day >= since)
        .group_by(_d.day, _d.user_name)
        .order_by(_d.day, _d.user_name)
    )
    if user is not None:
        query = query.where(_d.user_name == user)
    return [(_day(d), u, _joined(v1, v2)) for d, u, v1, v2 in conn.execute(query)]


_FIGURES = ("allocated", "reported", "idle", "billed")


def session_rows(conn: Connection, user: str, limit: int) -> list[dict[str, object]]:
    sums = (
        sa.select(
            _d.server_id,
            *(c for f in _FIGURES for c in _exact_sum(_d[f"{f}_micro_usd"], f)),
        )
        .where(_d.user_name == user)
        .group_by(_d.server_id)
        .subquery()
    )
    query = (
        sa.select(
            servers_table,
            *_rate_columns,
            *(sums.c[f"{f}_{part}"] for f in _FIGURES for part in ("usd", "micro")),
        )
        .select_from(_with_rate.outerjoin(sums, sums.c.server_id == _s.id))
        .where(_s.user_name == user)
        .order_by(_s.started_us.desc(), _s.id.desc())
        .limit(limit)
    )
    out: list[dict[str, object]] = []
    for r in conn.execute(query).mappings():
        out.append(
            {
                "server_id": r["id"],
                "user": r["user_name"],
                "server_name": r["server_name"],
                "started": from_us(r["started_us"]).isoformat(),
                "stopped": None
                if r["stopped_us"] is None
                else from_us(r["stopped_us"]).isoformat(),
                "last_seen": from_us(r["last_seen_us"]).isoformat(),
                "running": r["stopped_us"] is None,
                "profile": r["profile"],
                "gpu_model": r["gpu_model"],
                "gpu_count": r["gpu_count"],
                # a part of a GPU or of a node ("1/7"), or None for whole GPUs
                "gpu_share": r["gpu_share"],
                "gpu_detail": r["gpu_detail"],
                "gpu_instance": r["gpu_instance"],
                "gpu_instance_gpus": r["gpu_instance_gpus"],
                "usd_per_gpu_hour": r["usd_per_gpu_hour"],
                "rate_source": r["rate_source"],
                **{f"{f}_micro_usd": _joined(r[f"{f}_usd"], r[f"{f}_micro"]) for f in _FIGURES},
                "energy_wh": finite(r["report_energy_wh"]),
                "cells": r["report_cells"],
            }
        )
    return out


def finite(value: object) -> float | None:
    """A float column's value, or None when it is not a finite number (JSON has none)."""
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def allocation(r: Any) -> GpuAllocation:
    """A row's GPUs, with their part of a GPU or of a node where it has one."""
    found = GpuAllocation(r["gpu_model"], int(r["gpu_count"]))
    if r["gpu_share"] is None:
        return found
    try:
        share = Fraction(str(r["gpu_share"]))
    except (ValueError, ZeroDivisionError):
        return found  # kept as whole GPUs: the price per GPU-hour is the row's either way
    return replace(
        found,
        share=share,
        detail=str(r["gpu_detail"]),
        instance=str(r["gpu_instance"]),
        instance_gpus=int(r["gpu_instance_gpus"]),
    )


def server_row(r: Any) -> ServerRow:
    return ServerRow(
        server_id=int(r["id"]),
        user=r["user_name"],
        server_name=r["server_name"],
        started=from_us(r["started_us"]),
        stopped=None if r["stopped_us"] is None else from_us(r["stopped_us"]),
        last_seen=from_us(r["last_seen_us"]),
        profile=r["profile"],
        rate=Rate(
            allocation(r),
            Decimal(r["usd_per_gpu_hour"]),
            r["rate_source"],
        ),
    )


def load_open(conn: Connection, where: Any, ceiling: ReportCeiling) -> list[OpenServer]:
    """The servers matching ``where`` with their days and latest report, as in memory."""
    servers: dict[int, OpenServer] = {}
    query = sa.select(servers_table, *_rate_columns).select_from(_with_rate).where(where)
    for r in conn.execute(query).mappings():
        row = server_row(r)
        server = OpenServer(
            row,
            ceiling.rate(row.rate),
            last=LastReport(
                r["report_session"],
                int(r["report_cost_micro_usd"] or 0),
                int(r["report_idle_micro_usd"] or 0),
                finite(r["report_energy_wh"]),
                r["report_cells"],
            ),
        )
        servers[server.row.server_id] = server
    if not servers:
        return []
    days = sa.select(daily_table).where(_d.server_id.in_(sorted(servers)))
    for r in conn.execute(days).mappings():
        server = servers[int(r["server_id"])]
        d = _day(r["day"])
        server.flushed[d] = Day(
            int(r["allocated_micro_usd"]),
            int(r["reported_micro_usd"]),
            int(r["idle_micro_usd"]),
            int(r["billed_micro_usd"]),
        )
        server.reported[d] = int(r["reported_micro_usd"])
        server.idle[d] = int(r["idle_micro_usd"])
    return list(servers.values())


def _day(value: object) -> date:
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value))


def rate_id(conn: Connection, rate: Rate) -> int:
    """The id of ``rate``'s row, added when it is new."""
    values = {
        "gpu_model": rate.allocation.model,
        "gpu_count": rate.allocation.count,
        "usd_per_gpu_hour": str(rate.usd_per_gpu_hour),
        "source": rate.source[:1000],
    }
    found = conn.execute(
        sa.select(_r.id).where(*(_r[k] == v for k, v in values.items())).limit(1)
    ).scalar()
    if found is not None:
        return int(found)
    key = conn.execute(rates_table.insert().values(values)).inserted_primary_key
    assert key is not None
    a = rate.allocation
    if a.share != 1 or a.instance:
        conn.execute(
            rate_shares_table.insert().values(
                rate_id=int(key[0]),
                share=str(a.share),
                detail=a.detail[:64],
                instance=a.instance[:64],
                instance_gpus=a.instance_gpus,
            )
        )
    return int(key[0])


def span_rows(
    conn: Connection, users: Collection[str], since_us: int, until_us: int
) -> list[ServerRow]:
    """The server sessions of ``users`` that ran at some point in [since, until): what an
    allowance in GPU-hours counts."""
    if not users:
        return []
    query = (
        sa.select(servers_table, *_rate_columns)
        .select_from(_with_rate)
        .where(
            _s.user_name.in_(sorted(users)),
            _s.started_us < until_us,
            sa.or_(_s.stopped_us.is_(None), _s.stopped_us > since_us),
        )
    )
    return [server_row(r) for r in conn.execute(query).mappings()]
