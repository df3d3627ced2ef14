"""``jupyter gpucost export-focus OUT [--since DATE] [--ledger URL] [--currency CODE]``: the
ledger as a FOCUS 1.2 Cost and Usage dataset (showback), for FinOps tools that ingest FOCUS,
written by :mod:`.focus_writer`.

One row per session, hour and notebook/kernel: an hour's cost is split by what the cells
that ended in it cost per notebook and kernel (``x_Notebook``, ``x_Kernel``), the rest of
the hour (time between cells) in a row with neither. The cost is the ledger's estimate
(``BilledCost`` = ``EffectiveCost`` = ``ListCost`` = ``ContractedCost``), in the currency
the ledger recorded (``--currency`` for sessions it recorded no machine for, when the
ledger's other sessions do not agree on one). The single server knows no group or profile:
``x_Group`` and ``x_Profile`` are empty.

Exit codes: 0 written, 2 the command line is wrong, 4 ``OUT`` cannot be written (nothing is
left behind), 5 the ledger has no sessions, 6 the ledger cannot be used.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import sqlalchemy as sa

from ..core.currency import is_currency_code
from ..core.i18n import _
from ..core.sql import sqlite_path
from ..server.ledger import Ledger, LedgerUnavailable, SessionHour
from .cli import ledger_url
from .command import EXIT_EMPTY, EXIT_LEDGER, EXIT_OK, EXIT_REFUSED, Parser
from .focus_writer import Charge, ExportRefused, out_format, write_focus

HOUR = Decimal("0.000001")


def split(cost: int, cells: tuple[tuple[str, str, int], ...]) -> list[tuple[str, str, int]]:
    """An hour's ``cost`` split by what its cells cost per (notebook, kernel), each taking
    no more than is left, and the rest (time between cells) to ``("", "")``: the parts
    always add up to ``cost``, exactly."""
    parts, left = [], cost
    for notebook, kernel, spent in cells:
        take = min(spent, left)
        if take > 0:
            parts.append((notebook, kernel, take))
            left -= take
    if left > 0 or not parts:
        parts.append(("", "", left))
    return parts


def charges(hour: SessionHour) -> list[Charge]:
    """One session-hour as FOCUS charges: one per notebook and kernel whose cells ran in it,
    and one for the rest of the hour."""
    start = datetime.fromtimestamp(hour.hour_unix_s, UTC)
    machine = hour.machine
    hours = Decimal(hour.minutes) / 60
    region = machine.region if machine is not None else ""
    instance_type = machine.instance_type if machine is not None else ""
    provider = machine.provider if machine is not None else ""
    where = " ".join(p for p in (provider, instance_type) if p) or "this machine"
    basis = f"estimate: the server's price of {where}" + (f" in {region}" if region else "")
    out = []
    for notebook, kernel, cost in split(hour.cost, hour.cells):
        share = hours if hour.cost == 0 else hours * cost / hour.cost
        out.append(
            Charge(
                start=start,
                end=start + timedelta(hours=1),
                cost=cost,
                list_cost=cost,
                currency=hour.currency,
                price_basis=basis,
                hours=share.quantize(HOUR),
                session=hour.session_id,
                resource_id=(machine.key if machine is not None else "") or hour.session_id,
                resource_type="Jupyter server session",
                user=hour.user or "",
                notebook=notebook,
                kernel=kernel,
                provider=provider,
                instance_type=instance_type,
                region=region,
            )
        )
    return out


def currency_of(hours: list[SessionHour], given: str | None) -> str | None:
    """The currency of sessions whose machine the ledger does not know: ``given``, else the
    one currency of the ledger's other sessions; ``None`` when neither says."""
    if given:
        return given
    known = {h.currency for h in hours if h.currency}
    return known.pop() if len(known) == 1 else None


def currency_code(text: str) -> str:
    """A currency as ISO 4217 writes it (``EUR``), as the ledger's currencies are kept."""
    if not is_currency_code(text):
        raise ValueError(text)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    p = Parser(
        prog="jupyter gpucost export-focus",
        description=_("Write the ledger as a FOCUS 1.2 dataset (showback)."),
    )
    p.add_argument("out", help=_("the file to write: .csv or .parquet"))
    p.add_argument("--since", type=date.fromisoformat, help=_("only hours from DATE (YYYY-MM-DD)"))
    p.add_argument("--ledger", help=_("the ledger's URL (default: this machine's server ledger)"))
    p.add_argument(
        "--currency",
        type=currency_code,
        help=_("the currency of sessions the ledger recorded no machine for (ISO 4217)"),
    )
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    url = ledger_url(args.ledger)
    if not url:
        return EXIT_LEDGER
    out = Path(args.out)
    try:
        ledger_file = sqlite_path(url)
    except sa.exc.ArgumentError:  # not a URL: the ledger says so below
        ledger_file = None
    try:
        out_format(out, () if ledger_file is None else (Path(ledger_file),))
    except ExportRefused as e:
        print(e, file=sys.stderr)
        return EXIT_REFUSED
    since = (
        None
        if args.since is None
        else int(
            datetime(args.since.year, args.since.month, args.since.day, tzinfo=UTC).timestamp()
        )
    )
    try:
        ledger = Ledger(url)
        try:
            hours = ledger.session_hours(since)
            empty = not hours and not ledger.session_hours(None)
        finally:
            ledger.close()
    except LedgerUnavailable as e:
        print(_("the ledger cannot be used: {why}").format(why=e), file=sys.stderr)
        return EXIT_LEDGER
    if empty:
        print(_("the ledger has no sessions yet: nothing to export"), file=sys.stderr)
        return EXIT_EMPTY
    currency = currency_of(hours, args.currency)
    if currency is None and any(not h.currency for h in hours):
        print(
            _(
                "the ledger does not say in which currency some sessions were priced: "
                "pass --currency CODE"
            ),
            file=sys.stderr,
        )
        return EXIT_LEDGER
    rows = [
        c for h in hours for c in charges(h if h.currency else replace(h, currency=currency or ""))
    ]
    try:
        write_focus(out, rows, () if ledger_file is None else (Path(ledger_file),))
    except ExportRefused as e:
        print(e, file=sys.stderr)
        return EXIT_REFUSED
    print(_("{rows} FOCUS rows written to {out}").format(rows=len(rows), out=args.out))
    return EXIT_OK
