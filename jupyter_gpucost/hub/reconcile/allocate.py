"""The bill's cost of each node, allocated per UTC day to the users whose sessions ran on
it (pure).

For each charge of a node (a bill row: the node over ``[start, end)``, ``BilledCost``), a
session on that node gets ``BilledCost × its GPUs on the node × its time in the charge ÷
(the node's GPUs × the charge's length)``: the share the hub already bills it for (whole
GPUs, a MIG slice, a time-sliced GPU: :class:`~..model.GpuAllocation`). What no session
used (hours with no session, GPUs no pod held) stays with the node as **unallocated (idle
nodes)**: never spread over the users.

A node's GPUs are the shipped catalog's for the node's instance type as the cluster said
it, else the instance's as the profile says (:func:`spans_of`). A node whose GPU count is
not known is never guessed (the most its sessions held at once would bill one user on a
shared node for all of it): its whole cost of the day is left unallocated, with that
reason (:attr:`NodeDay.reason`).

An Azure scale set (an AKS node pool) is one resource on the bill for all its nodes: a
session on one of them gets ``BilledCost × its GPUs × its time in the charge ÷ (the row's
ConsumedQuantity in instance-hours × the instance's GPUs)``; a row whose unit is not hours
is left unallocated with that reason. No row gives its sessions more than it billed.

Sums are exact fractions, rounded once per node and day to whole micro-dollars by the
largest remainder: the users' parts and the unallocated part add up to the node's billed
cost of that day exactly.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction

from ...core.focus import BilledMachine, day_of, settled
from ...core.i18n import _
from ...core.money import round_micro
from ...reconcile.read import Bill, BillError, BillRow
from ..ledger import LEDGER_CURRENCY
from ..ledger.placement import PlacedSession
from ..ledger.reconciled import ReconciledLine

_MICRO = 1_000_000
_US_PER_HOUR = 3_600_000_000


@dataclass(frozen=True)
class NodeSpan:
    """One session on one node: who, from when to when, and how many of its GPUs."""

    user: str
    node: str
    start: datetime
    end: datetime
    gpus: Fraction
    #: the instance's GPUs as its profile says (0: not known)
    node_gpus: int
    usd_per_hour: Fraction


#: why a node's day is unallocated: its GPU count is not known
GPUS_UNKNOWN = "gpus_unknown"
#: why a scale set's day is unallocated: its rows do not say its instance-hours
NOT_HOURS = "not_hours"
_HOURS = re.compile(r"(?:([0-9]+(?:\.[0-9]+)?)\s*)?hours?", re.IGNORECASE)


@dataclass
class NodeDay:
    """One node's day: each user's part of its bill and estimate, and the part no session
    used (micro-dollars)."""

    resource_id: str
    billed: dict[str, int] = field(default_factory=dict)
    estimated: dict[str, int] = field(default_factory=dict)
    unallocated: int = 0
    #: why the whole day is unallocated ("": what no session used, if anything)
    reason: str = ""
    #: the cluster's nodes the bill's resource is
    nodes: tuple[str, ...] = ()

    def users(self) -> list[str]:
        return sorted(set(self.billed) | set(self.estimated))


@dataclass
class DayResult:
    """One UTC day of the bill, per node (by the bill's resource id)."""

    day: date
    settled: bool
    nodes: dict[str, NodeDay] = field(default_factory=dict)

    def _per_user(self, what: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for node in self.nodes.values():
            for user in node.users():
                found[user] = found.get(user, 0) + getattr(node, what).get(user, 0)
        return found

    @property
    def billed(self) -> dict[str, int]:
        """user → their part of the day's bill, over every node."""
        return self._per_user("billed")

    @property
    def estimated(self) -> dict[str, int]:
        """user → the hub's own estimate of the same nodes that day."""
        return self._per_user("estimated")

    @property
    def unallocated(self) -> dict[str, int]:
        """node's resource id → the part of its bill no session used."""
        return {rid: node.unallocated for rid, node in sorted(self.nodes.items())}

    @property
    def billed_total(self) -> int:
        return sum(sum(n.billed.values()) + n.unallocated for n in self.nodes.values())

    @property
    def estimated_total(self) -> int:
        return sum(sum(n.estimated.values()) for n in self.nodes.values())

    @property
    def accuracy(self) -> Fraction | None:
        """Estimated ÷ billed (``None``: nothing billed)."""
        billed = self.billed_total
        return Fraction(self.estimated_total, billed) if billed else None

    def lines(self) -> list[ReconciledLine]:
        lines = []
        for rid, node in sorted(self.nodes.items()):
            for user in node.users():
                billed, estimated = node.billed.get(user, 0), node.estimated.get(user, 0)
                lines.append(
                    ReconciledLine(self.day, "user", user, billed, estimated, self.settled, rid)
                )
            lines.append(
                ReconciledLine(self.day, "unallocated", rid, node.unallocated, 0, self.settled, rid)
            )
        return lines


def spans_of(
    sessions: Iterable[PlacedSession], catalog_gpus: Mapping[str, int] | None = None
) -> list[NodeSpan]:
    """The sessions as spans on their nodes (one not stopped: up to when the service last
    saw it running). A node's GPUs: ``catalog_gpus`` (instance type → its GPUs, the
    shipped catalog's) of the node's instance type as the cluster said it, else the
    profile's instance's, else 0 (not known)."""
    spans = []
    for s in sessions:
        row = s.row
        end = row.stopped or row.last_seen
        allocation = row.rate.allocation
        catalog = catalog_gpus or {}
        known = (
            catalog.get(s.instance_type, 0)
            or allocation.instance_gpus
            or catalog.get(allocation.instance, 0)
        )
        spans.append(
            NodeSpan(
                row.user,
                s.node,
                row.started,
                max(end, row.started),
                Fraction(allocation.count) * allocation.share,
                known,
                Fraction(row.rate.usd_per_hour),
            )
        )
    return spans


def _us(a: datetime, b: datetime) -> int:
    delta = b - a
    return max(0, (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


def _overlap_us(span: NodeSpan, start: datetime, end: datetime) -> int:
    return _us(max(span.start, start), min(span.end, end))


def node_gpus(spans: Sequence[NodeSpan]) -> Fraction:
    """A node's GPUs: its instance's as a profile or the catalog says (if the sessions held
    more at once, that: their shares never add up to more than the node); 0: not known,
    never guessed."""
    known = max((s.node_gpus for s in spans), default=0)
    if known <= 0:
        return Fraction(0)
    events = sorted([(s.start, 1, s.gpus) for s in spans] + [(s.end, 0, -s.gpus) for s in spans])
    held = most = Fraction(0)
    for _when, _order, change in events:
        held += change
        most = max(most, held)
    return max(Fraction(known), most)


def largest_remainder(total: int, parts: Mapping[str, Fraction]) -> dict[str, int]:
    """Whole parts of ``total`` in proportion to the exact ``parts`` (which add up to
    within one unit per part of it): floors, then the units left to the largest remainders
    (ties by name). The result adds up to ``total`` exactly."""
    floors = {k: v.numerator // v.denominator for k, v in parts.items()}
    left = total - sum(floors.values())
    order = sorted(parts, key=lambda k: (-(parts[k] - floors[k]), k))
    step = 1 if left >= 0 else -1
    i = 0
    while left != 0 and order:
        floors[order[i % len(order)]] += step
        left -= step
        i += 1
    return floors


def instance_hours(row: BillRow) -> Fraction | None:
    """A scale set's row's instance-hours: its ``ConsumedQuantity`` where its unit is hours
    (``Hours``, ``1 Hour``, ``10 Hours``: a block of hours); ``None``: not said."""
    found = _HOURS.fullmatch(row.unit.strip())
    if row.quantity is None or found is None:
        return None
    hours = Fraction(row.quantity) * Fraction(found[1] or 1)
    return hours if hours > 0 else None


def allocate(
    rows: Sequence[BillRow],
    nodes: Mapping[str, BilledMachine],
    spans: Sequence[NodeSpan],
    newest: datetime,
    since: date | None = None,
) -> list[DayResult]:
    """Each day's allocation of the bill rows that name one of ``nodes`` (node → what the
    bill names it by; the nodes of an Azure scale set share its rows). Raises
    :class:`BillError` for a matched row in another currency."""
    by_node: dict[str, list[NodeSpan]] = defaultdict(list)
    for span in spans:
        by_node[span.node].append(span)
    #: the bill's resources (lower case) → the cluster's nodes it is (a scale set: several)
    members: dict[str, list[str]] = defaultdict(list)
    for name, machine in sorted(nodes.items()):
        members[machine.key.lower()].append(name)
    on_unit = {unit: [s for n in names for s in by_node[n]] for unit, names in members.items()}
    capacity = {unit: node_gpus(found) for unit, found in on_unit.items()}
    #: (day, resource) → user → exact micro-dollars; and the resource's cost of that day
    parts: dict[tuple[date, str], dict[str, Fraction]] = defaultdict(dict)
    whole: dict[tuple[date, str], Fraction] = defaultdict(Fraction)
    reasons: dict[tuple[date, str], str] = {}
    #: the last part of a ResourceId → the nodes the bill may name by it
    by_last: dict[str, list[str]] = defaultdict(list)
    for name, machine in sorted(nodes.items()):
        for part in machine.last_parts():
            by_last[part].append(name)
    for row in rows:
        last = row.resource_id.strip().lower().rsplit("/", 1)[-1]
        candidates = by_last.get(last, ())
        node = next((n for n in candidates if nodes[n].names(row.resource_id)), None)
        if node is None:
            continue
        day = day_of(row.start)
        if since is not None and day < since:
            continue
        if row.currency != LEDGER_CURRENCY:
            raise BillError(
                _(
                    "the bill is in {bill} but the hub ledger's amounts are in {ledger}: "
                    "nothing was converted nor kept"
                ).format(bill=row.currency or "?", ledger=LEDGER_CURRENCY)
            )
        unit = nodes[node].key.lower()
        billed = Fraction(row.billed) * _MICRO
        whole[(day, unit)] += billed
        used_by = on_unit[unit]
        gpus = capacity[unit]
        holding = any(span.gpus for span in used_by)
        if gpus <= 0:
            if holding:
                reasons[(day, unit)] = GPUS_UNKNOWN
            continue
        if nodes[node].scale_set:
            hours = instance_hours(row)
            if hours is None:
                if holding:
                    reasons.setdefault((day, unit), NOT_HOURS)
                continue
            # the set's capacity: its instance-hours × each instance's GPUs
            room = hours * max(span.node_gpus for span in used_by) * _US_PER_HOUR
        else:
            room = gpus * _us(row.start, row.end)
        if room <= 0:
            continue
        mine: dict[str, Fraction] = defaultdict(Fraction)
        for span in used_by:
            used = _overlap_us(span, row.start, row.end)
            if used and span.gpus:
                mine[span.user] += billed * span.gpus * used / room
        total = sum(mine.values(), Fraction(0))
        if total and abs(total) > abs(billed):
            # the row says fewer hours than the sessions ran: never more than the row
            mine = {user: v * billed / total for user, v in mine.items()}
        kept = parts[(day, unit)]
        for user, v in mine.items():
            kept[user] = kept.get(user, Fraction(0)) + v
    days: dict[date, DayResult] = {}
    for (day, unit), cost in sorted(whole.items()):
        result = days.setdefault(day, DayResult(day, settled(day, newest)))
        users = parts.get((day, unit), {})
        shares = {f"u:{u}": v for u, v in users.items()}
        shares["n:"] = cost - sum(users.values(), Fraction(0))
        split = largest_remainder(round_micro(cost), shares)
        unused = split.pop("n:")
        names = members[unit]
        key = nodes[names[0]].key
        result.nodes[key] = NodeDay(
            key,
            {name[2:]: amount for name, amount in split.items()},
            _estimate(day, on_unit[unit]),
            unused,
            reasons.get((day, unit), ""),
            tuple(names),
        )
    return [days[d] for d in sorted(days)]


def _estimate(day: date, spans: Sequence[NodeSpan]) -> dict[str, int]:
    """The hub's own estimate of a node's day: each session's rate × its time on it."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    end = start + timedelta(days=1)
    exact: dict[str, Fraction] = defaultdict(Fraction)
    for span in spans:
        used = _overlap_us(span, start, end)
        if used:
            exact[span.user] += span.usd_per_hour * _MICRO * used / _US_PER_HOUR
    return {user: round_micro(amount) for user, amount in sorted(exact.items())}


def read_and_allocate(
    bill: Bill,
    nodes: Mapping[str, BilledMachine],
    spans: Sequence[NodeSpan],
    since: date | None = None,
) -> list[DayResult]:
    """:func:`allocate` over what was read; no day when the bill has no charge."""
    if bill.newest_end is None:
        return []
    return allocate(bill.rows, nodes, spans, bill.newest_end, since)
