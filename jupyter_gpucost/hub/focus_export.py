"""``python -m jupyter_gpucost.hub export-focus [--since DATE] [--until DATE] OUT``: the hub
ledger as a FOCUS 1.2 Cost and Usage dataset (showback), written by the single server's
writer (:mod:`jupyter_gpucost.reconcile.focus_writer`): one row per server session and day.

* The day is the ledger's (cut in its time zone, ``c.GpuCostHub.timezone``); its
  ``ChargePeriodStart``/``End`` are that day's midnights, in UTC.
* ``BilledCost`` = ``EffectiveCost`` = ``ContractedCost`` is the day's bill (``max`` of what
  the hub allocated and what the server reported); ``ListCost`` what the profile's GPUs cost
  at their price (the allocation); ``x_PriceBasis`` the price's source as the ledger kept it.
* ``BillingCurrency`` is the service's (``c.GpuCostHub`` prices' currency).
* ``x_User``, ``x_Profile``; ``x_Group`` the groups the user was in when the server
  started (the ledger keeps them from the Hub's list; several are joined by commas, none
  for a server opened while the database was away or before the ledger kept them);
  ``x_SessionId`` the server's own session id when it reported one (the same as in that
  server's own export), else ``hub-server-ID``. The hub knows no notebooks or kernels:
  ``x_Notebook`` and ``x_Kernel`` are empty.
* Only what the service has flushed is in the ledger (every few seconds while it runs).

The ledger is read, never written: a database without the hub's tables is said to be empty.
Exit codes: 0 written, 2 the command line is wrong, 4 ``OUT`` cannot be written, 5 nothing to
export, 6 the ledger or the config cannot be used.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta, tzinfo
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import sqlalchemy as sa

from ..core.i18n import _
from ..core.sql import create_engine, sqlite_path
from ..reconcile.command import EXIT_EMPTY, EXIT_LEDGER, EXIT_OK, EXIT_REFUSED, Parser
from ..reconcile.focus_writer import Charge, ExportRefused, out_format, write_focus
from .ledger import default_url
from .ledger.schema import (
    daily_table,
    rates_table,
    safe_url,
    server_groups_table,
    servers_table,
)
from .model import HubConfigError


def day_charges(
    conn: sa.Connection, tz: tzinfo, currency: str, since: date | None, until: date | None
) -> list[Charge]:
    """Every server's bill per day of the hub ledger, from ``since`` to ``until``
    (inclusive), oldest first."""
    d, s, r = daily_table.c, servers_table.c, rates_table.c
    query = (
        sa.select(
            d.day,
            d.user_name,
            d.allocated_micro_usd,
            d.billed_micro_usd,
            s.id,
            s.server_name,
            s.profile,
            s.report_session,
            s.started_us,
            s.stopped_us,
            r.gpu_model,
            r.gpu_count,
            r.source,
        )
        .join(servers_table, s.id == d.server_id)
        .join(rates_table, r.id == s.rate_id)
        .order_by(d.day, d.user_name, s.id)
    )
    if since is not None:
        query = query.where(d.day >= since)
    if until is not None:
        query = query.where(d.day <= until)
    g = server_groups_table.c
    groups: dict[int, list[str]] = {}
    if sa.inspect(conn).has_table(server_groups_table.name):  # a ledger from before it
        for server_id, name in conn.execute(
            sa.select(g.server_id, g.group_name).order_by(g.group_name)
        ):
            groups.setdefault(int(server_id), []).append(str(name))
    out = []
    for row in conn.execute(query):
        start = datetime.combine(row.day, time(), tz)
        end = datetime.combine(row.day + timedelta(days=1), time(), tz)
        gpus = f"{row.gpu_count}×{row.gpu_model}"
        server = row.server_name or "default"
        out.append(
            Charge(
                start=start,
                end=end,
                cost=int(row.billed_micro_usd),
                list_cost=int(row.allocated_micro_usd),
                currency=currency,
                price_basis=f"hub allocation of {gpus}: {row.source}",
                hours=_hours(row.started_us, row.stopped_us, start, end),
                session=row.report_session or f"hub-server-{row.id}",
                resource_id=f"jupyterhub/{row.user_name}/{server}/{row.id}",
                resource_type="JupyterHub server",
                user=row.user_name,
                profile=row.profile or "",
                group=",".join(groups.get(int(row.id), [])),
                instance_type=gpus,
            )
        )
    return out


def _hours(started_us: int, stopped_us: int | None, start: datetime, end: datetime) -> Decimal:
    """The hours of the day the server ran (to its stop, or the whole rest of the day)."""
    day_start, day_end = int(start.timestamp() * 1e6), int(end.timestamp() * 1e6)
    ran = min(stopped_us or day_end, day_end) - max(started_us, day_start)
    return (Decimal(max(ran, 0)) / 3_600_000_000).quantize(Decimal("0.000001"))


def service_config(config: str | None, *, currency: bool = True) -> tuple[str, ZoneInfo, str]:
    """The ledger URL, time zone and currency of the service's config (``--config``): what
    the hub's commands (export-focus, reconcile) read of it. ``currency=False``: the
    ledger's place and zone only (``""`` for the currency), without building the profiles'
    prices, which only an export labels its rows with."""
    from .app import GpuCostHub

    app = GpuCostHub()
    app.initialize(["--config", config] if config else [])
    try:
        tz = ZoneInfo(app.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise HubConfigError(f"c.GpuCostHub.timezone = {app.timezone!r} is not valid") from None
    url = app.ledger_url or default_url(Path(app.data_dir).absolute())
    return url, tz, app.profile_settings().prices.session_currency if currency else ""


def main(argv: Sequence[str]) -> int:
    p = Parser(
        prog="python -m jupyter_gpucost.hub export-focus",
        description=_("Write the hub ledger as a FOCUS 1.2 dataset (showback)."),
    )
    p.add_argument("out", help=_("the file to write: .csv or .parquet"))
    p.add_argument("--since", type=date.fromisoformat, help=_("only days from DATE (YYYY-MM-DD)"))
    p.add_argument("--until", type=date.fromisoformat, help=_("only days to DATE (YYYY-MM-DD)"))
    p.add_argument("--config", help=_("the service's config file (jupyterhub_config.py)"))
    args = p.parse_args(list(argv))
    if args.since and args.until and args.until < args.since:
        p.error(_("--until is before --since"))
    try:
        url, tz, currency = service_config(args.config)
    except HubConfigError as e:
        print(e, file=sys.stderr)
        return EXIT_LEDGER
    out = Path(args.out)
    try:
        path = sqlite_path(url)
    except sa.exc.ArgumentError:
        print(_("c.GpuCostHub.ledger_url is not a database URL"), file=sys.stderr)
        return EXIT_LEDGER
    try:
        out_format(out, () if path is None else (path,))
    except ExportRefused as e:
        print(e, file=sys.stderr)
        return EXIT_REFUSED
    if path is not None and not path.is_file():
        print(_("no hub ledger at {url}: nothing to export").format(url=url), file=sys.stderr)
        return EXIT_EMPTY
    try:
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                known = sa.inspect(conn).has_table(daily_table.name)
                rows = day_charges(conn, tz, currency, args.since, args.until) if known else []
                empty = (
                    not known or conn.execute(sa.select(daily_table.c.day).limit(1)).first() is None
                )
        finally:
            engine.dispose()
    except (sa.exc.SQLAlchemyError, ImportError) as e:
        why = getattr(e, "orig", None) or e
        print(
            _("the hub ledger {url} cannot be read: {why}").format(url=safe_url(url), why=why),
            file=sys.stderr,
        )
        return EXIT_LEDGER
    if empty:
        print(
            _("the hub ledger {url} has no days billed yet: nothing to export").format(
                url=safe_url(url)
            ),
            file=sys.stderr,
        )
        return EXIT_EMPTY
    try:
        write_focus(out, rows, () if path is None else (path,))
    except ExportRefused as e:
        print(e, file=sys.stderr)
        return EXIT_REFUSED
    print(_("{rows} FOCUS rows written to {out}").format(rows=len(rows), out=args.out))
    return EXIT_OK
