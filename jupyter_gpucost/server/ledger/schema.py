"""The ledger's tables (SQLAlchemy Core) and the time buckets its rows are keyed by.

* ``sessions``: one row per run of the server (under JupyterHub, one spawn), with its
  running totals in micro-dollars, updated at every flush;
* ``spend``: per session and minute, what was spent in that minute (micro-dollars) and
  the price rate in force: the rollup that today / this month / all time and the history
  of older sessions are read from (30 days of one session is 43,200 small rows);
* ``spend_quarters``: the same per quarter hour, for today / this month;
* ``gpu_minutes``: per session, GPU and minute, utilisation, memory and power, for the
  history chart of past windows;
* ``budget_actions``: what budgets did; ``cells``: cell records sent by the kernel extension;
* ``alerts_sent``: each alert's event key sent, until when it is remembered
  (:mod:`...core.sent_keys`);
* ``machines``: the machine each session ran on (provider, instance id, type, region and
  what its provider's bill names it by) and the currency of its amounts;
* ``reconciled``: per machine, day and bill read, what the bill says beside the estimate
  (``jupyter gpucost reconcile``); a later read of the same bill replaces its rows;
* ``meta``: the schema version.
"""

from __future__ import annotations

import sqlalchemy as sa

from ...core.sent_keys import sent_keys_table

SCHEMA_VERSION = 1

metadata = sa.MetaData()

meta_table = sa.Table(
    "meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

sessions_table = sa.Table(
    "sessions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("started_unix_s", sa.Float, nullable=False),
    sa.Column("last_unix_s", sa.Float, nullable=False),
    sa.Column("ended_unix_s", sa.Float, nullable=True),
    sa.Column("user", sa.String(256), nullable=True),
    sa.Column("cost_micro_usd", sa.BigInteger, nullable=False, default=0),
    sa.Column("idle_micro_usd", sa.BigInteger, nullable=False, default=0),
    sa.Column("energy_j", sa.Float, nullable=True),
    sa.Column("peak_memory_bytes", sa.BigInteger, nullable=True),
)

spend_table = sa.Table(
    "spend",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("minute_unix_s", sa.BigInteger, primary_key=True),
    sa.Column("cost_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("idle_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("rate_micro_usd_per_hour", sa.BigInteger, nullable=False),
    sa.Index("ix_spend_minute", "minute_unix_s"),
)

#: spend per session and quarter hour: every time zone's midnight falls on a quarter hour,
#: so today / this month are read from at most 96 rows per session and day
quarters_table = sa.Table(
    "spend_quarters",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("quarter_unix_s", sa.BigInteger, primary_key=True),
    sa.Column("cost_micro_usd", sa.BigInteger, nullable=False),
    sa.Index("ix_spend_quarters_quarter", "quarter_unix_s"),
)

gpu_minutes_table = sa.Table(
    "gpu_minutes",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("gpu_index", sa.Integer, primary_key=True),
    sa.Column("minute_unix_s", sa.BigInteger, primary_key=True),
    sa.Column("utilization_pct_sum", sa.Float, nullable=False),
    sa.Column("power_w_sum", sa.Float, nullable=False),
    sa.Column("samples", sa.Integer, nullable=False),
    sa.Column("memory_used_bytes_max", sa.BigInteger, nullable=True),
    sa.Index("ix_gpu_minutes_minute", "minute_unix_s"),
)

#: what the budget did (warnings are not kept here: actions only), newest last
actions_table = sa.Table(
    "budget_actions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("record", sa.JSON, nullable=False),
    sa.Index("ix_budget_actions_at", "at"),
)

cells_table = sa.Table(
    "cells",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("cell_id", sa.String(256), nullable=False),
    sa.Column("notebook_path", sa.String(1024), nullable=True),
    sa.Column("kernel_id", sa.String(64), nullable=True),
    sa.Column("started", sa.String(40), nullable=False),
    sa.Column("ended", sa.String(40), nullable=False),
    sa.Column("record", sa.JSON, nullable=False),
    sa.Index("ix_cells_ended", "ended"),
)


def minute_of(unix_s: float) -> int:
    """The minute (unix seconds) ``unix_s`` falls in."""
    return int(unix_s // 60) * 60


def quarter_of(unix_s: float) -> int:
    """The quarter hour (unix seconds) ``unix_s`` falls in."""
    return int(unix_s // 900) * 900


#: the alerts sent, by event key (:mod:`...core.sent_keys`)
alerts_sent_table = sent_keys_table(metadata, "alerts_sent")


#: the machine a session ran on, as detected at its start (sessions with none have no row)
machines_table = sa.Table(
    "machines",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("provider", sa.String(32), nullable=False),
    sa.Column("instance_id", sa.String(256), nullable=False, default=""),
    sa.Column("instance_type", sa.String(256), nullable=False, default=""),
    sa.Column("region", sa.String(256), nullable=False, default=""),
    sa.Column("name", sa.String(256), nullable=False, default=""),
    sa.Column("project", sa.String(256), nullable=False, default=""),
    sa.Column("resource_group", sa.String(256), nullable=False, default=""),
    sa.Column("subscription_id", sa.String(256), nullable=False, default=""),
    sa.Column("currency", sa.String(3), nullable=False),
)

#: what a bill says per machine and day, beside the estimate (micro-units of ``currency``)
reconciled_table = sa.Table(
    "reconciled",
    metadata,
    sa.Column("resource_id", sa.String(512), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("source", sa.String(1024), primary_key=True),
    sa.Column("provider", sa.String(32), nullable=False),
    sa.Column("instance_type", sa.String(256), nullable=False),
    sa.Column("currency", sa.String(3), nullable=False),
    sa.Column("estimated_micro", sa.BigInteger, nullable=False),
    sa.Column("billed_micro", sa.BigInteger, nullable=False),
    sa.Column("effective_micro", sa.BigInteger, nullable=False),
    sa.Column("list_micro", sa.BigInteger, nullable=False),
    sa.Column("no_session_micro", sa.BigInteger, nullable=False),
    sa.Column("settled", sa.Boolean, nullable=False),
    #: the end of the bill's newest charge (ISO 8601, UTC): "your bill to ..."
    sa.Column("bill_to", sa.String(40), nullable=False),
    sa.Column("reconciled_at", sa.String(40), nullable=False),
)
