"""One reconciliation of the hub ledger with a FOCUS bill: read the bill's rows for the
nodes the ledger's sessions ran on, allocate them (:mod:`.allocate`) and keep the result
in the ledger, or refuse the bill (:class:`~jupyter_gpucost.reconcile.read.BillError`)
with the ledger untouched. Blocking: the service runs it in a thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from sqlalchemy.engine import Engine

from ...core.catalog import CatalogError
from ...core.focus import BilledMachine
from ...core.instance_prices import load_instance_rows
from ...reconcile.read import Bill, read_bill
from ..ledger.placement import PlacementLedger, nodes_of
from ..ledger.reconciled import ReconciledLedger
from .allocate import DayResult, read_and_allocate, spans_of
from .nodes import billed_machine

#: how far back the sessions are read when no ``since`` is given (a bill of a year)
LOOK_BACK = timedelta(days=400)


@dataclass
class Outcome:
    """What a reconciliation found and kept."""

    days: list[DayResult]
    bill: Bill
    #: node → what the bill names it by, for the nodes the ledger knows
    nodes: dict[str, BilledMachine] = field(default_factory=dict)
    #: nodes whose ``providerID`` no bill row can name (kind, bare metal)
    unnamed: list[str] = field(default_factory=list)


def reconcile(
    engine: Engine,
    source: str,
    *,
    since: date | None = None,
    options: dict[str, str] | None = None,
    now: datetime | None = None,
) -> Outcome:
    """Read ``source``, allocate it, keep it. Raises ``BillError`` (nothing kept)."""
    now = now or datetime.now(UTC)
    start = datetime(since.year, since.month, since.day, tzinfo=UTC) if since else now - LOOK_BACK
    sessions = PlacementLedger(engine).sessions(start, now + timedelta(days=1))
    nodes: dict[str, BilledMachine] = {}
    unnamed: list[str] = []
    for node, provider_id in sorted(nodes_of(sessions).items()):
        machine = billed_machine(provider_id)
        if machine is None:
            unnamed.append(node)
        else:
            nodes[node] = machine
    parts = {p for m in nodes.values() for p in m.last_parts()}
    bill = read_bill(source, parts, options)
    days = read_and_allocate(bill, nodes, spans_of(sessions, catalog_gpus()), since)
    if days and bill.newest_end is not None:
        lines = [line for d in days for line in d.lines()]
        covered = [(d.day, rid) for d in days for rid in d.nodes]
        ReconciledLedger(engine).replace(covered, lines, bill.newest_end, now)
    return Outcome(days, bill, nodes, unnamed)


def catalog_gpus() -> dict[str, int]:
    """Instance type → its GPUs, as the shipped catalog says (empty if it cannot be read:
    then only the profiles' counts are known)."""
    try:
        return {row.instance: row.gpus for row in load_instance_rows()}
    except CatalogError:
        return {}
