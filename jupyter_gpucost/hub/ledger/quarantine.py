"""Rows the ledger cannot bill, taken out of it: found when the ledger is opened, or
refused by a flush. A figure outside what the ledger may hold (below 0, or above
:data:`~.state.MAX_ROW_MICRO_USD`) would make a sum overflow or a total absurd; its row
goes to ``hub_quarantine`` (as text, for an admin to look at), is logged, and everything
else goes on."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...core.hub_protocol import MAX_CELLS, MAX_ENERGY_WH, MAX_REPORT_MICRO_USD
from .schema import daily_table, quarantine_table, servers_table
from .state import MAX_ROW_MICRO_USD

_d = daily_table.c
_s = servers_table.c
_FIGURES = (
    _d.allocated_micro_usd,
    _d.reported_micro_usd,
    _d.idle_micro_usd,
    _d.billed_micro_usd,
)


def keep(
    conn: Connection,
    *,
    now_us: int,
    source: str,
    row: Mapping[str, object],
    reason: str,
    log: logging.Logger,
) -> None:
    """Put one row in quarantine (its values as text) and log it."""
    text = ", ".join(f"{k}={v!r}" for k, v in row.items())[:4000]
    user = row.get("user_name")
    server_id = row.get("server_id")
    conn.execute(
        quarantine_table.insert().values(
            quarantined_us=now_us,
            source=source,
            user_name=str(user)[:255] if user is not None else None,
            server_id=server_id if isinstance(server_id, int) else None,
            row_text=text,
            reason=reason[:500],
        )
    )
    log.error("gpucost hub: a %s row is quarantined (%s): %s", source, reason, text)


def quarantine_bad_rows(conn: Connection, now_us: int, log: logging.Logger) -> int:
    """Move every day row holding a figure the ledger cannot hold to quarantine, and
    clear the informational report figures of a server that are out of range. Returns how
    many day rows were moved."""
    out_of_range = sa.or_(*(sa.or_(c < 0, c > MAX_ROW_MICRO_USD) for c in _FIGURES))
    bad = conn.execute(sa.select(daily_table).where(out_of_range)).mappings().all()
    for row in bad:
        keep(
            conn,
            now_us=now_us,
            source="hub_daily",
            row=dict(row),
            reason=f"a figure outside 0 to {MAX_ROW_MICRO_USD} micro-dollars",
            log=log,
        )
    if bad:
        conn.execute(daily_table.delete().where(out_of_range))
    energy = _s.report_energy_wh
    for column, broken in (
        (_s.report_cells, sa.or_(_s.report_cells < 0, _s.report_cells > MAX_CELLS)),
        # NaN is not equal to itself; on PostgreSQL it also sorts above every number
        (energy, sa.or_(energy < 0, energy > MAX_ENERGY_WH, energy != energy)),
        (
            _s.report_cost_micro_usd,
            sa.or_(_s.report_cost_micro_usd < 0, _s.report_cost_micro_usd > MAX_REPORT_MICRO_USD),
        ),
        (
            _s.report_idle_micro_usd,
            sa.or_(_s.report_idle_micro_usd < 0, _s.report_idle_micro_usd > MAX_REPORT_MICRO_USD),
        ),
    ):
        cleared = conn.execute(servers_table.update().where(broken).values({column.name: None}))
        if cleared.rowcount:
            log.error(
                "gpucost hub: %d server rows had a %s out of range; it is cleared",
                cleared.rowcount,
                column.name,
            )
    return len(bad)
