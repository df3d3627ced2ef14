"""What a flush or a close writes: the changed days of servers, their ``last_seen`` and
their latest report, in the transaction the caller holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .schema import daily_table, servers_table, to_us
from .state import Day, LastReport, OpenServer

_s = servers_table.c
_d = daily_table.c


def write(
    conn: Connection,
    batch: list[tuple[OpenServer, dict[date, Day]]],
    reports: list[tuple[int, LastReport]],
    now: datetime,
) -> None:
    write_days(conn, batch)
    ids = [s.row.server_id for s, _ in batch]
    if ids:
        conn.execute(
            servers_table.update()
            .where(_s.id.in_(ids), _s.stopped_us.is_(None), _s.last_seen_us < to_us(now))
            .values(last_seen_us=to_us(now))
        )
    if reports:
        conn.execute(
            servers_table.update()
            .where(_s.id == sa.bindparam("b_id"))
            .values({k: sa.bindparam(f"b_{k}") for k in report_values(LastReport())}),
            [{"b_id": i, **{f"b_{k}": v for k, v in report_values(r).items()}} for i, r in reports],
        )


def write_days(conn: Connection, batch: Iterable[tuple[OpenServer, Mapping[date, Day]]]) -> None:
    inserts: list[dict[str, object]] = []
    updates: list[dict[str, object]] = []
    for server, days in batch:
        for d, v in days.items():
            values = {
                "allocated_micro_usd": v.allocated,
                "reported_micro_usd": v.reported,
                "idle_micro_usd": v.idle,
                "billed_micro_usd": v.billed,
            }
            if d in server.flushed:
                updates.append(
                    {"b_id": server.row.server_id, "b_day": d}
                    | {f"b_{k}": x for k, x in values.items()}
                )
            else:
                inserts.append(
                    {"server_id": server.row.server_id, "day": d, "user_name": server.row.user}
                    | values
                )
    if inserts:
        conn.execute(daily_table.insert(), inserts)
    if updates:
        conn.execute(
            daily_table.update()
            .where(_d.server_id == sa.bindparam("b_id"), _d.day == sa.bindparam("b_day"))
            .values(
                {
                    k: sa.bindparam(f"b_{k}")
                    for k in (
                        "allocated_micro_usd",
                        "reported_micro_usd",
                        "idle_micro_usd",
                        "billed_micro_usd",
                    )
                }
            ),
            updates,
        )


def report_values(last: LastReport) -> dict[str, object]:
    return {
        "report_session": last.session_id,
        "report_cost_micro_usd": last.cost_micro_usd,
        "report_idle_micro_usd": last.idle_micro_usd,
        "report_energy_wh": last.energy_wh,
        "report_cells": last.cells,
    }
