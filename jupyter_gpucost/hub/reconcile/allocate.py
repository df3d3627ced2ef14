"""The bill's cost of each node, allocated per UTC day to the users whose sessions ran on
it (pure).

For each charge of a node (a bill row: the node over ``[start, end)``, ``BilledCost``), a
session on that node gets ``BilledCost × its GPUs on the node × its time in the charge ÷
(the node's GPUs × the charge's length)``: the share the hub already bills it for (whole
GPUs, a MIG slice, a time-sliced GPU: :class:`~..model.GpuAllocation`). What no session
used (hours with no session, GPUs no pod held) stays with the node as **unallocated (idle
nodes)**: never spread over the users.

A node's GPUs are the shipped catalog's for the node's instance type as the cluster said
it, else the instance's as the profile says (:func:`spans_of`). A node whose GPU count
is not known is never guessed (the most its sessions held at once would bill one user on a
shared node for all of it): its whole cost of the day is left unallocated, with that
reason (:attr:`NodeDay.reason`). Sums are exact fractions, rounded once per node and day to
whole micro-dollars by the largest remainder: the users' parts and the unallocated part
add up to the node's billed cost of that day exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction

from ...core.focus import BilledMachine, day_of, settled
from ...core.i18n import _
from ...core.money import round_micro
from ...reconcile.read import Bill, BillError, BillRow
from ..ledger.placement import PlacedSession
from ..ledger.reconciled import ReconciledLine

#: the currency the hub ledger keeps its amounts in
LEDGER_CURRENCY = "USD"
_MICRO = 1_000_000
_US_PER_HOUR = 3_600_000_000


@dataclass(frozen=True)
class Span:
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
) -> list[Span]:
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
            Span(
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


def _overlap_us(span: Span, start: datetime, end: datetime) -> int:
    return _us(max(span.start, start), min(span.end, end))


def node_gpus(spans: Sequence[Span]) -> Fraction:
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


def allocate(
    rows: Sequence[BillRow],
    nodes: Mapping[str, BilledMachine],
    spans: Sequence[Span],
    newest: datetime,
    since: date | None = None,
) -> list[DayResult]:
    """Each day's allocation of the bill rows that name one of ``nodes`` (node → what the
    bill names it by). Raises :class:`BillError` for a matched row in another currency."""
    by_node: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        by_node[span.node].append(span)
    capacity = {node: node_gpus(s) for node, s in by_node.items()}
    #: (day, node) → user → exact micro-dollars; and the node's whole cost of that day
    parts: dict[tuple[date, str], dict[str, Fraction]] = defaultdict(dict)
    whole: dict[tuple[date, str], Fraction] = defaultdict(Fraction)
    keys: dict[str, str] = {}
    unknown: set[tuple[date, str]] = set()
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
        keys[node] = nodes[node].key
        billed = Fraction(row.billed) * _MICRO
        whole[(day, node)] += billed
        length = _us(row.start, row.end)
        gpus = capacity.get(node, Fraction(0))
        if gpus <= 0 and any(span.gpus for span in by_node[node]):
            unknown.add((day, node))
        if length <= 0 or gpus <= 0:
            continue
        mine = parts[(day, node)]
        for span in by_node[node]:
            used = _overlap_us(span, row.start, row.end)
            if used and span.gpus:
                mine[span.user] = mine.get(span.user, Fraction(0)) + billed * span.gpus * used / (
                    gpus * length
                )
    days: dict[date, DayResult] = {}
    for (day, node), cost in sorted(whole.items()):
        result = days.setdefault(day, DayResult(day, settled(day, newest)))
        users = parts.get((day, node), {})
        shares = {f"u:{u}": v for u, v in users.items()}
        shares["n:"] = cost - sum(users.values(), Fraction(0))
        split = largest_remainder(round_micro(cost), shares)
        unused = split.pop("n:")
        result.nodes[keys[node]] = NodeDay(
            keys[node],
            {name[2:]: amount for name, amount in split.items()},
            _estimate(day, by_node.get(node, ())),
            unused,
            GPUS_UNKNOWN if (day, node) in unknown else "",
            (node,),
        )
    return [days[d] for d in sorted(days)]


def _estimate(day: date, spans: Sequence[Span]) -> dict[str, int]:
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
    spans: Sequence[Span],
    since: date | None = None,
) -> list[DayResult]:
    """:func:`allocate` over what was read; no day when the bill has no charge."""
    if bill.newest_end is None:
        return []
    return allocate(bill.rows, nodes, spans, bill.newest_end, since)
