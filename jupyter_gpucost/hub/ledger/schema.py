"""The hub ledger's tables (SQLAlchemy Core), and opening its database.

* ``hub_rates``: each GPU allocation and price (text, exact) servers were billed at, with
  where the price comes from;
* ``hub_rate_shares``: for a rate whose GPUs are part of a GPU or of a node, that part
  (``1/7``, ``MIG 1g.5gb``, ``p4d.24xlarge`` of 8 GPUs);
* ``hub_servers``: one row per server session (a user's named or default server, from one
  start): who, when (integer microseconds since the epoch, UTC), the profile, its rate,
  and the latest figures the server reported;
* ``hub_daily``: per server and local day, what was allocated, what the server reported,
  and the bill (``max`` of the two), in integer micro-dollars; the user's name is kept
  here too, so that "every user this month" is one indexed scan with no join;
* ``hub_deadlines``: the servers in their grace period and when the service stops them,
  so that a restart of the service does not give them a new grace;
* ``hub_idle_spans``: stretches of time a server's GPUs sat idle with no kernel busy, and
  whether the idle policy reclaimed the server (:mod:`.reclaims`);
* ``hub_quarantine``: rows taken out of the bill because they held a figure the ledger
  cannot hold (written by an older version, or by hand), kept as text for an admin;
* ``hub_usage``: per server and local day, how its allocation split by what the cluster's
  dcgm-exporter saw (used, idle, unknown, in integer micro-dollars), the energy its GPUs
  drew (mJ) and how many polls found its own report disagreeing (:mod:`.usage`);
* ``hub_interruptions``: the spot interruptions servers reported (:mod:`.interruptions`),
  one row per user and interruption id: informational, never part of a bill;
* ``hub_alerts_sent``: each alert's event key sent, until when it is remembered
  (:mod:`...core.sent_keys`), so that neither a restart nor other alerts send it again;
* ``hub_server_groups``: the groups each server's user was in when it started (the Hub's
  memberships at that time), for the FOCUS export's ``x_Group``;
* ``hub_server_nodes``: the cluster node each server session ran on and that node's
  ``providerID`` (the cloud's instance), as the cluster's Prometheus said (:mod:`.placement`);
* ``hub_node_types``: each node's instance type by its ``providerID``, where
  kube-state-metrics exports it (:mod:`.placement`);
* ``hub_reconciled``: the cloud's FOCUS bill allocated to users per day, and the part of
  each node's bill no session used (:mod:`.reconciled`);
* ``hub_meta``: the schema version and the time zone the days were cut in.

Tables added since a ledger was created are added when it is opened.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ...core.sent_keys import sent_keys_table
from ...core.sql import create_engine, sqlite_path
from ..model import HubConfigError

SCHEMA_VERSION = 1
URL_SETTING = "c.GpuCostHub.ledger_url"

metadata = sa.MetaData()

meta_table = sa.Table(
    "hub_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

#: the rates servers were billed at (one row per allocation, price and source: a
#: session refers to its rate instead of repeating its source text)
rates_table = sa.Table(
    "hub_rates",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("gpu_model", sa.String(64), nullable=False),
    sa.Column("gpu_count", sa.Integer, nullable=False),
    #: exact, as text: Decimal('3.06') -> "3.06"
    sa.Column("usd_per_gpu_hour", sa.String(32), nullable=False),
    sa.Column("source", sa.String(1000), nullable=False),
    sa.Index("ix_hub_rates_model", "gpu_model", "gpu_count", "usd_per_gpu_hour"),
)

#: a rate's GPUs that are part of a GPU or of a node (a MIG slice "1/7", a GPU time-sliced
#: N ways, a share of a multi-GPU instance); a rate with none is whole GPUs
rate_shares_table = sa.Table(
    "hub_rate_shares",
    metadata,
    sa.Column("rate_id", sa.Integer, sa.ForeignKey("hub_rates.id"), primary_key=True),
    #: of one GPU, exact: "1/7"
    sa.Column("share", sa.String(32), nullable=False),
    sa.Column("detail", sa.String(64), nullable=False),
    sa.Column("instance", sa.String(64), nullable=False),
    sa.Column("instance_gpus", sa.Integer, nullable=False),
)

servers_table = sa.Table(
    "hub_servers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_name", sa.String(255), nullable=False),
    sa.Column("server_name", sa.String(255), nullable=False),
    sa.Column("started_us", sa.BigInteger, nullable=False),
    sa.Column("stopped_us", sa.BigInteger, nullable=True),
    sa.Column("last_seen_us", sa.BigInteger, nullable=False),
    sa.Column("profile", sa.String(255), nullable=True),
    sa.Column("rate_id", sa.Integer, sa.ForeignKey("hub_rates.id"), nullable=False),
    # the server's latest report (what it counted since it started its meter)
    sa.Column("report_session", sa.String(200), nullable=True),
    sa.Column("report_cost_micro_usd", sa.BigInteger, nullable=True),
    sa.Column("report_idle_micro_usd", sa.BigInteger, nullable=True),
    sa.Column("report_energy_wh", sa.Float, nullable=True),
    sa.Column("report_cells", sa.Integer, nullable=True),
    sa.UniqueConstraint("user_name", "server_name", "started_us", name="uq_hub_servers_start"),
    sa.Index("ix_hub_servers_user_started", "user_name", "started_us"),
    sa.Index("ix_hub_servers_stopped", "stopped_us"),
)

daily_table = sa.Table(
    "hub_daily",
    metadata,
    sa.Column("server_id", sa.Integer, primary_key=True),
    sa.Column("day", sa.Date, primary_key=True),
    sa.Column("user_name", sa.String(255), nullable=False),
    sa.Column("allocated_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("reported_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("idle_micro_usd", sa.BigInteger, nullable=False),
    #: max(allocated, reported): what the user is billed for this server and day
    sa.Column("billed_micro_usd", sa.BigInteger, nullable=False),
    # covering indexes: every user this month, and one user's days
    sa.Index("ix_hub_daily_day_user", "day", "user_name", "billed_micro_usd"),
    sa.Index("ix_hub_daily_user_day", "user_name", "day", "billed_micro_usd"),
)

deadlines_table = sa.Table(
    "hub_deadlines",
    metadata,
    sa.Column("server_id", sa.Integer, primary_key=True),
    sa.Column("since_us", sa.BigInteger, nullable=False),
    sa.Column("stop_at_us", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.String(2000), nullable=False),
)

#: idle stretches of servers (the idle policy's record; see .reclaims)
idle_spans_table = sa.Table(
    "hub_idle_spans",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("server_id", sa.Integer, nullable=False),
    sa.Column("user_name", sa.String(255), nullable=False),
    sa.Column("server_name", sa.String(255), nullable=False),
    sa.Column("profile", sa.String(255), nullable=True),
    sa.Column("started_us", sa.BigInteger, nullable=False),
    sa.Column("ended_us", sa.BigInteger, nullable=False),
    #: idle seconds counted, in microseconds
    sa.Column("idle_us", sa.BigInteger, nullable=False),
    sa.Column("gpu_count", sa.Integer, nullable=False),
    #: the server's rate, exact, as text ("6.862")
    sa.Column("usd_per_hour", sa.String(32), nullable=False),
    #: "active", "reclaimed" or "gone"
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Index("ix_hub_idle_spans_ended", "ended_us"),
)

quarantine_table = sa.Table(
    "hub_quarantine",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("quarantined_us", sa.BigInteger, nullable=False),
    #: which table the row came from
    sa.Column("source", sa.String(64), nullable=False),
    sa.Column("user_name", sa.String(255), nullable=True),
    sa.Column("server_id", sa.Integer, nullable=True),
    #: the row's values as text (exact, whatever they were)
    sa.Column("row_text", sa.String(4000), nullable=False),
    sa.Column("reason", sa.String(500), nullable=False),
)

#: the allocation split by what dcgm-exporter saw (:mod:`.usage`)
usage_table = sa.Table(
    "hub_usage",
    metadata,
    sa.Column("server_id", sa.Integer, primary_key=True),
    sa.Column("day", sa.Date, primary_key=True),
    sa.Column("user_name", sa.String(255), nullable=False),
    sa.Column("used_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("idle_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("unknown_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("energy_mj", sa.BigInteger, nullable=False),
    sa.Column("idle_energy_mj", sa.BigInteger, nullable=False),
    sa.Column("disagreements", sa.Integer, nullable=False),
    #: the server's allocation is split up to here (a restart of the service goes on)
    sa.Column("until_us", sa.BigInteger, nullable=False),
    sa.Index("ix_hub_usage_day_user", "day", "user_name"),
)

#: requests for more allowance and their decisions (:mod:`.requests`)
requests_table = sa.Table(
    "hub_allowance_requests",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_name", sa.String(255), nullable=False),
    #: the allowance asked for more of: "user" or "group:<name>"
    sa.Column("source", sa.String(300), nullable=False),
    sa.Column("unit", sa.String(16), nullable=False),
    sa.Column("amount_micro", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.String(1000), nullable=False),
    sa.Column("asked_us", sa.BigInteger, nullable=False),
    #: "open", "approved" or "declined"
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("decided_by", sa.String(255), nullable=True),
    sa.Column("decided_us", sa.BigInteger, nullable=True),
    sa.Column("note", sa.String(1000), nullable=True),
    sa.Index("ix_hub_allowance_requests_user", "user_name", "asked_us"),
)

#: spot interruptions servers reported (:mod:`.interruptions`); a user's claim, shown only
interruptions_table = sa.Table(
    "hub_interruptions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_name", sa.String(255), nullable=False),
    #: the server's stable id of the interruption (unique per user, not across users)
    sa.Column("interruption_id", sa.String(200), nullable=False),
    sa.Column("server_name", sa.String(255), nullable=False),
    sa.Column("at_us", sa.BigInteger, nullable=False),
    sa.Column("received_us", sa.BigInteger, nullable=False),
    sa.Column("provider", sa.String(32), nullable=False),
    sa.Column("market", sa.String(32), nullable=False),
    sa.Column("lost_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("session_micro_usd", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("user_name", "interruption_id", name="uq_hub_interruptions_id"),
    sa.Index("ix_hub_interruptions_at", "at_us", "user_name"),
)

#: the node each server session ran on, and the node's ``providerID`` (:mod:`.placement`)
server_nodes_table = sa.Table(
    "hub_server_nodes",
    metadata,
    sa.Column("server_id", sa.Integer, primary_key=True),
    sa.Column("node", sa.String(255), primary_key=True),
    sa.Column("user_name", sa.String(255), nullable=False),
    #: ``aws:///us-east-1a/i-0abc…``, ``gce://project/zone/name``, ``azure:///subscriptions/…``
    sa.Column("provider_id", sa.String(1000), nullable=False),
    sa.Column("first_seen_us", sa.BigInteger, nullable=False),
    sa.Column("last_seen_us", sa.BigInteger, nullable=False),
)

#: each node's instance type by its ``providerID``, where kube-state-metrics exports the
#: node's ``node.kubernetes.io/instance-type`` label (:mod:`.placement`)
node_types_table = sa.Table(
    "hub_node_types",
    metadata,
    sa.Column("provider_id", sa.String(1000), primary_key=True),
    sa.Column("instance_type", sa.String(255), nullable=False),
    sa.Column("seen_us", sa.BigInteger, nullable=False),
)

#: the cloud's bill allocated per UTC day (:mod:`.reconciled`): one row per day, node and
#: user (``kind`` "user"), and per day and node for the part no session used ("unallocated")
reconciled_table = sa.Table(
    "hub_reconciled",
    metadata,
    sa.Column("day", sa.Date, primary_key=True),
    sa.Column("kind", sa.String(16), primary_key=True),
    #: the user's name, or the node's resource id
    sa.Column("name", sa.String(1000), primary_key=True),
    #: the node's resource id on the bill (a user's line is their part of that node)
    sa.Column("resource_id", sa.String(1000), primary_key=True),
    sa.Column("billed_micro_usd", sa.BigInteger, nullable=False),
    #: the hub's own estimate over the same day and nodes (0 for "unallocated")
    sa.Column("estimated_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("settled", sa.Boolean, nullable=False),
    #: the end of the bill's newest charge when it was read
    sa.Column("bill_to_us", sa.BigInteger, nullable=False),
    sa.Column("read_us", sa.BigInteger, nullable=False),
)

#: the alerts sent, by event key (:mod:`...core.sent_keys`)
alerts_sent_table = sent_keys_table(metadata, "hub_alerts_sent")

#: the groups a server's user was in when the server started, as the Hub API listed them
#: (the FOCUS export's ``x_Group``); a server opened while the database was away has none
server_groups_table = sa.Table(
    "hub_server_groups",
    metadata,
    sa.Column("server_id", sa.Integer, primary_key=True),
    sa.Column("group_name", sa.String(255), primary_key=True),
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(when: datetime) -> int:
    """Whole microseconds since the epoch (exact: no float)."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"{when.isoformat()} has no time zone")
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def safe_url(url: str) -> str:
    """The URL as it may be logged: its password hidden."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<not a database URL>"


def open_engine(url: str, tz_name: str, log: logging.Logger) -> Engine:
    """An engine on the ledger at ``url`` (SQLite in WAL mode, or any SQLAlchemy URL),
    its schema created or checked. A database that cannot be used is a
    :class:`HubConfigError` naming ``c.GpuCostHub.ledger_url`` (password hidden)."""
    try:
        engine = _create(url)
    except (sa.exc.ArgumentError, OSError, ImportError) as e:
        raise HubConfigError(f"{URL_SETTING}: cannot use {safe_url(url)}: {e}") from None
    try:
        with engine.begin() as conn:
            metadata.create_all(conn)
            meta = dict(conn.execute(sa.select(meta_table.c.key, meta_table.c.value)).all())
            if "schema_version" not in meta:
                conn.execute(
                    meta_table.insert(),
                    [
                        {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                        {"key": "time_zone", "value": tz_name},
                    ],
                )
            elif int(meta["schema_version"]) > SCHEMA_VERSION:
                raise HubConfigError(
                    f"{URL_SETTING}: {safe_url(url)} was written by a newer jupyter-gpucost "
                    f"(hub schema {meta['schema_version']})"
                )
            elif meta.get("time_zone") not in (None, tz_name):
                log.warning(
                    "gpucost hub: the ledger's days so far were cut in %s; from now on in %s "
                    "(c.GpuCostHub.time_zone). Days already recorded keep their old cut.",
                    meta["time_zone"],
                    tz_name,
                )
                conn.execute(
                    meta_table.update().where(meta_table.c.key == "time_zone").values(value=tz_name)
                )
    except sa.exc.SQLAlchemyError as e:
        engine.dispose()
        reason = getattr(e, "orig", None) or e
        raise HubConfigError(f"{URL_SETTING}: cannot open {safe_url(url)}: {reason}") from None
    return engine


def _create(url: str) -> Engine:
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    return create_engine(url)
