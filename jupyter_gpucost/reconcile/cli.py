"""``jupyter gpucost reconcile SOURCE [--since DATE] [--json]``: the bill beside the estimate.

Exit codes: 0 done (the result kept in the ledger), 2 the command line is wrong, 4 the bill
was refused (the message says why; the ledger is untouched), 6 the ledger cannot be used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from fractions import Fraction

from ..core.currency import symbol
from ..core.i18n import _
from ..core.money import column, json_amount, to_units
from ..server.ledger import Ledger, LedgerUnavailable
from .command import (
    EXIT_LEDGER,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    Parser,
    bill_parser,
    storage_options,
)
from .match import MachineResult, match, now

__all__ = ["EXIT_LEDGER", "EXIT_OK", "EXIT_REFUSED", "EXIT_USAGE", "Parser", "ledger_url", "main"]


def ledger_url(given: str | None) -> str | None:
    """The ledger named, else this machine's server ledger; ``None`` (said on stderr)
    when there is none."""
    if given is not None:
        return given
    from ..headless.ledger import default_ledger_url

    url = default_ledger_url()
    if not url:
        print(
            _("no ledger on this machine: start the server once, or pass --ledger URL"),
            file=sys.stderr,
        )
    return url


def parser() -> argparse.ArgumentParser:
    p = bill_parser(
        "jupyter gpucost reconcile",
        _("Match the cloud's FOCUS bill to the machines of the ledger."),
    )
    p.add_argument("--ledger", help=_("the ledger's URL (default: this machine's server ledger)"))
    return p


def _ratio(value: Fraction | None) -> float | None:
    return None if value is None else round(float(value), 4)


def as_json(results: list[MachineResult], stats: dict[str, object]) -> dict[str, object]:
    machines = []
    for r in results:
        m = r.machine.machine
        machines.append(
            {
                "resource_id": m.key,
                "provider": m.provider,
                "instance_type": m.instance_type or None,
                "region": m.region or None,
                "currency": r.machine.currency,
                "effective_rate": _ratio(r.effective_rate),
                "days": [
                    {
                        "date": d.day.isoformat(),
                        "estimated": json_amount(d.estimated),
                        "billed": json_amount(d.billed),
                        "effective": json_amount(d.effective),
                        "list": json_amount(d.list),
                        "no_session": json_amount(d.no_session),
                        "ratio": round(d.billed / d.estimated, 4) if d.estimated else None,
                        "settled": d.settled,
                    }
                    for d in r.days
                ],
            }
        )
    return {"machines": machines, **stats}


def as_text(results: list[MachineResult], stats: dict[str, object]) -> str:
    lines: list[str] = []
    if not results:
        lines.append(_("No row of this bill is for a machine the ledger recorded."))
    for r in results:
        m = r.machine.machine
        sign = symbol(r.machine.currency)
        rate = (
            _("effective rate {rate} × list").format(rate=f"{float(r.effective_rate):.2f}")
            if r.effective_rate is not None
            else _("no list cost")
        )
        lines.append(f"{m.provider} {m.instance_type} {m.key} ({rate})")
        head = [
            _("day"),
            _("estimated"),
            _("billed"),
            _("effective"),
            _("list"),
            _("billed ÷ estimated"),
            _("billed while no notebook was open"),
            "",
        ]
        amounts = [
            column([to_units(getattr(d, name)) for d in r.days], sign)
            for name in ("estimated", "billed", "effective", "list", "no_session")
        ]
        table = [head]
        for i, d in enumerate(r.days):
            ratio = f"{d.billed / d.estimated:.2f}" if d.estimated else "–"
            table.append(
                [
                    d.day.isoformat(),
                    *(a[i] for a in amounts[:4]),
                    ratio,
                    amounts[4][i],
                    "" if d.settled else _("not settled"),
                ]
            )
        widths = [max(len(row[c]) for row in table) for c in range(len(head))]
        for row in table:
            lines.append(
                "  "
                + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            )
    lines.append(
        _(
            "{read} rows read, {ignored} for other resources, {duplicates} duplicates "
            "counted once, {revised} replaced by a revision"
        ).format(**stats)
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    options = storage_options(p, args.storage_option)
    try:
        from .read import BillError, read_bill
    except ImportError as e:  # pragma: no cover - the extra is missing
        print(
            _(
                "jupyter gpucost reconcile needs pyarrow: "
                "pip install 'jupyter-gpucost[reconcile]' ({why})"
            ).format(why=e),
            file=sys.stderr,
        )
        return EXIT_REFUSED
    url = ledger_url(args.ledger)
    if not url:
        return EXIT_LEDGER
    try:
        ledger = Ledger(url)
    except LedgerUnavailable as e:
        print(_("the ledger cannot be used: {why}").format(why=e), file=sys.stderr)
        return EXIT_LEDGER
    try:
        machines = ledger.machines()
        parts = {p for m in machines for p in m.machine.last_parts()}
        try:
            bill = read_bill(args.source, parts, options)
            results = match(bill, machines, args.since)
        except BillError as e:
            print(_("the bill was refused: {why}").format(why=e), file=sys.stderr)
            print(_("nothing was kept in the ledger"), file=sys.stderr)
            return EXIT_REFUSED
        days = [d for r in results for d in r.days]
        if days:
            # the same bill read again, from anywhere, replaces its rows
            source = args.source if "://" in args.source else os.path.abspath(args.source)
            ledger.keep_reconciled(source, days, now())
        stats: dict[str, object] = {
            "read": bill.rows_read,
            "ignored": bill.ignored,
            "duplicates": bill.duplicates,
            "revised": bill.revised,
        }
    except LedgerUnavailable as e:
        print(_("the ledger cannot be used: {why}").format(why=e), file=sys.stderr)
        return EXIT_LEDGER
    finally:
        ledger.close()
    if args.json:
        print(json.dumps(as_json(results, {"rows": stats}), indent=1))
    else:
        print(as_text(results, stats))
    return EXIT_OK
