"""``python -m jupyter_gpucost.hub reconcile SOURCE [--since DATE] [--json]
[--config FILE] [--ledger URL]``: the cloud's FOCUS bill allocated to the hub's users.

Exit codes: 0 done (the result kept in the hub ledger), 2 the command line is wrong, 4 the
bill was refused (the message says why; the ledger is untouched), 6 the ledger cannot be
used.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from ...core.i18n import _
from ...core.money import column, json_amount, to_units
from ...reconcile.command import EXIT_LEDGER, EXIT_OK, EXIT_REFUSED, bill_parser, storage_options
from ..ledger.schema import open_engine
from ..model import HubConfigError
from .allocate import GPUS_UNKNOWN, NOT_HOURS, DayResult
from .run import Outcome, reconcile

#: what the service's config says: (the ledger's URL, its time zone's name)
LedgerOf = Callable[[str | None], tuple[str, str]]


def parser() -> argparse.ArgumentParser:
    p = bill_parser(
        "python -m jupyter_gpucost.hub reconcile",
        _("Allocate the cloud's FOCUS bill of the hub's nodes to its users."),
    )
    p.add_argument("--config", help=_("the service's config file (its ledger_url)"))
    p.add_argument("--ledger", help=_("the hub ledger's URL (default: the config's)"))
    return p


def _ratio(day: DayResult) -> float | None:
    accuracy = day.accuracy
    return None if accuracy is None else round(float(accuracy), 4)


def notes(outcome: Outcome) -> list[str]:
    """Why a node's whole cost was left unallocated, once per node (translated)."""
    found: list[str] = []
    for d in outcome.days:
        for rid, node in sorted(d.nodes.items()):
            if node.reason == GPUS_UNKNOWN:
                note = _("node {node}: its GPU count is not known; its cost is left unallocated")
            elif node.reason == NOT_HOURS:
                note = _(
                    "node {node}: the bill does not say its scale set's instance-hours; "
                    "its cost is left unallocated"
                )
            else:
                continue
            text = note.format(node=", ".join(node.nodes) or rid)
            if text not in found:
                found.append(text)
    return found


def as_json(outcome: Outcome) -> dict[str, object]:
    bill = outcome.bill
    return {
        "currency": "USD",
        "bill_to": bill.newest_end.isoformat() if bill.newest_end else None,
        "nodes": {n: m.key for n, m in sorted(outcome.nodes.items())},
        "unnamed_nodes": outcome.unnamed,
        "days": [
            {
                "date": d.day.isoformat(),
                "settled": d.settled,
                "billed": json_amount(d.billed_total),
                "estimated": json_amount(d.estimated_total),
                "accuracy": _ratio(d),
                "users": [
                    {
                        "user": u,
                        "billed": json_amount(d.billed.get(u, 0)),
                        "estimated": json_amount(d.estimated.get(u, 0)),
                    }
                    for u in sorted(set(d.billed) | set(d.estimated))
                ],
                "unallocated": json_amount(sum(d.unallocated.values())),
                "unallocated_nodes": [
                    {
                        "resource_id": k,
                        "billed": json_amount(n.unallocated),
                        "nodes": list(n.nodes),
                        "reason": n.reason,
                    }
                    for k, n in sorted(d.nodes.items())
                ],
            }
            for d in outcome.days
        ],
        "notes": notes(outcome),
        "rows": {
            "read": bill.rows_read,
            "ignored": bill.ignored,
            "duplicates": bill.duplicates,
            "revised": bill.revised,
        },
    }


def as_text(outcome: Outcome) -> str:
    lines: list[str] = []
    if not outcome.days:
        lines.append(_("No row of this bill is for a node the hub ledger recorded."))
    unallocated = _("unallocated (idle nodes)")
    for d in outcome.days:
        accuracy = _ratio(d)
        lines.append(
            _("{day}: billed {billed}, estimated {estimated}, accuracy {accuracy}{settled}").format(
                day=d.day.isoformat(),
                billed=column([to_units(d.billed_total)])[0],
                estimated=column([to_units(d.estimated_total)])[0],
                accuracy="–" if accuracy is None else f"{accuracy:.2f}",
                settled="" if d.settled else " " + _("(not settled)"),
            )
        )
        names = sorted(set(d.billed) | set(d.estimated))
        billed = column(
            [to_units(d.billed.get(u, 0)) for u in names] + [to_units(sum(d.unallocated.values()))]
        )
        estimated = column([to_units(d.estimated.get(u, 0)) for u in names])
        width = max((len(n) for n in [*names, unallocated]), default=0)
        for i, name in enumerate(names):
            lines.append(f"  {name.ljust(width)}  {billed[i]}  ({_('estimated')} {estimated[i]})")
        lines.append(f"  {unallocated.ljust(width)}  {billed[-1]}")
    lines.extend(notes(outcome))
    if outcome.unnamed:
        lines.append(
            _("nodes no bill row names (no cloud's providerID): {nodes}").format(
                nodes=", ".join(outcome.unnamed)
            )
        )
    bill = outcome.bill
    lines.append(
        _(
            "{read} rows read, {ignored} for other resources, {duplicates} duplicates "
            "counted once, {revised} replaced by a revision"
        ).format(
            read=bill.rows_read,
            ignored=bill.ignored,
            duplicates=bill.duplicates,
            revised=bill.revised,
        )
    )
    return "\n".join(lines)


def main(
    argv: Sequence[str], ledger_of: LedgerOf, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    p = parser()
    args = p.parse_args(list(argv))
    options = storage_options(p, args.storage_option)
    try:
        from ...reconcile.read import BillError
    except ImportError as e:  # pragma: no cover - the extra is missing
        print(
            _("reconcile needs pyarrow: pip install 'jupyter-gpucost[reconcile]' ({why})").format(
                why=e
            ),
            file=err,
        )
        return EXIT_REFUSED
    try:
        url, tz_name = ledger_of(args.config)
        engine = open_engine(args.ledger or url, tz_name, logging.getLogger("jupyter_gpucost.hub"))
    except HubConfigError as e:
        print(_("the hub ledger cannot be used: {why}").format(why=e), file=err)
        return EXIT_LEDGER
    try:
        outcome = reconcile(engine, args.source, since=args.since, options=options)
    except BillError as e:
        print(_("the bill was refused: {why}").format(why=e), file=err)
        print(_("nothing was kept in the ledger"), file=err)
        return EXIT_REFUSED
    finally:
        engine.dispose()
    if args.json:
        print(json.dumps(as_json(outcome), indent=1), file=out)
    else:
        print(as_text(outcome), file=out)
    return EXIT_OK
