"""The ``hub_server_nodes`` table: the cluster node each server session ran on, and that
node's ``providerID`` (the cloud's instance: ``aws:///us-east-1a/i-0abc…``,
``gce://project/zone/name``, an Azure resource id), as the cluster's Prometheus said
(kube-state-metrics' ``kube_pod_info`` and ``kube_node_info``, :mod:`..cluster.placement`).

A pod does not move between nodes, but a session restarted in place may: each (session,
node) is one row, with when it was first and last seen there. A ledger created before this
table gets it when it is opened (:func:`.schema.open_engine`); its older sessions have no
node, and a reconciliation counts no bill to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..model import ServerRow
from .queries import _rate_columns, _with_rate, server_row
from .schema import from_us, node_types_table, server_nodes_table, servers_table, to_us

_n = server_nodes_table.c
_t = node_types_table.c
_s = servers_table.c
#: the longest ``providerID`` kept (Azure's resource ids are the longest, ~250 characters)
MAX_PROVIDER_ID = 1000


@dataclass(frozen=True)
class Placement:
    """One server session seen on one node."""

    server_id: int
    user: str
    node: str
    provider_id: str
    seen: datetime
    #: the node's ``node.kubernetes.io/instance-type`` ("": not exported)
    instance_type: str = ""


@dataclass(frozen=True)
class PlacedSession:
    """A server session, the node it ran on, and when it was seen there."""

    row: ServerRow
    node: str
    provider_id: str
    first_seen: datetime
    last_seen: datetime
    #: the node's instance type, where it was seen ("": not known)
    instance_type: str = ""


class PlacementLedger:
    """Reads and writes ``hub_server_nodes`` (each call its own transaction)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(self, placements: Iterable[Placement]) -> int:
        """Keep where each session was seen (a known pair only moves its ``last_seen``);
        the number of rows written."""
        written = 0
        with self.engine.begin() as conn:
            for p in placements:
                if not p.node or not p.provider_id or len(p.provider_id) > MAX_PROVIDER_ID:
                    continue
                seen_us = to_us(p.seen)
                if p.instance_type:
                    _keep_type(conn, p.provider_id, p.instance_type[:255], seen_us)
                key = (_n.server_id == p.server_id) & (_n.node == p.node[:255])
                found = conn.execute(sa.select(_n.last_seen_us).where(key)).first()
                if found is None:
                    conn.execute(
                        server_nodes_table.insert().values(
                            server_id=p.server_id,
                            node=p.node[:255],
                            user_name=p.user,
                            provider_id=p.provider_id,
                            first_seen_us=seen_us,
                            last_seen_us=seen_us,
                        )
                    )
                elif seen_us > found[0]:
                    conn.execute(
                        server_nodes_table.update()
                        .where(key)
                        .values(last_seen_us=seen_us, provider_id=p.provider_id)
                    )
                else:
                    continue
                written += 1
        return written

    def sessions(self, since: datetime, until: datetime) -> list[PlacedSession]:
        """The sessions with a node that ran at some point in [since, until)."""
        query = (
            sa.select(
                servers_table,
                *_rate_columns,
                _n.node,
                _n.provider_id,
                _n.first_seen_us,
                _n.last_seen_us.label("node_last_seen_us"),
                _t.instance_type.label("node_instance_type"),
            )
            .select_from(
                _with_rate.join(server_nodes_table, _n.server_id == _s.id).outerjoin(
                    node_types_table, _t.provider_id == _n.provider_id
                )
            )
            .where(
                _s.started_us < to_us(until),
                sa.or_(_s.stopped_us.is_(None), _s.stopped_us > to_us(since)),
            )
            .order_by(_s.id, _n.node)
        )
        with self.engine.connect() as conn:
            return [
                PlacedSession(
                    server_row(r),
                    r["node"],
                    r["provider_id"],
                    from_us(r["first_seen_us"]),
                    from_us(r["node_last_seen_us"]),
                    r["node_instance_type"] or "",
                )
                for r in conn.execute(query).mappings()
            ]


def _keep_type(conn: sa.Connection, provider_id: str, instance_type: str, seen_us: int) -> None:
    """The node's instance type, the latest seen."""
    key = _t.provider_id == provider_id
    found = conn.execute(sa.select(_t.instance_type, _t.seen_us).where(key)).first()
    if found is None:
        conn.execute(
            node_types_table.insert().values(
                provider_id=provider_id, instance_type=instance_type, seen_us=seen_us
            )
        )
    elif found[0] != instance_type and seen_us > found[1]:
        conn.execute(
            node_types_table.update()
            .where(key)
            .values(instance_type=instance_type, seen_us=seen_us)
        )


def nodes_of(sessions: Sequence[PlacedSession]) -> dict[str, str]:
    """node → its latest ``providerID``."""
    latest: dict[str, tuple[datetime, str]] = {}
    for s in sessions:
        if s.node not in latest or s.last_seen >= latest[s.node][0]:
            latest[s.node] = (s.last_seen, s.provider_id)
    return {node: pid for node, (_, pid) in latest.items()}
