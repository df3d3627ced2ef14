"""Benchmark: a month of a 1,000-user hub in the hub ledger, its size and its admin query.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_hub_ledger.py [--users 1000] [--days 30]
        [--sessions-per-day 2] [--postgres] [--repeats 50] [--out results.json]

Fills a fresh hub ledger (SQLite; with ``--postgres`` also a PostgreSQL started on
loopback, as the tests do: Debian's ``postgresql``, ``make postgres``) with ``--days`` of
``--users`` users, each starting ``--sessions-per-day`` servers a day (a 2-hour and a
3-hour session, every other user on 2 × A100-80GB, the others on a T4, priced from the
shipped catalog (AWS on-demand) with its source text kept per session; a third of the
sessions reported above their allocation), written in bulk into the ledger's own tables.
On the last day every user has one server still running: the ledger is reopened (it
takes those servers up again, as after a restart) and flushed once. Then it measures:

* the ledger's size per user-month (SQLite: the file after a WAL checkpoint; PostgreSQL:
  ``pg_total_relation_size`` of its tables, indexes included);
* ``HubLedger.all_totals(now)``: every user's today and this month, exact up to now
  (the database's sums plus the running servers' spend since the flush): the admin page's
  data. Target: ≤ 200 ms for 1,000 users;
* its peers in the same run: a bare ``SELECT count(*), sum(billed_micro_usd)`` over the
  same day table (a scan that any "spend this month" page must at least do), and the
  month's sums per user in raw SQL (the database's part of ``all_totals``, without the
  running servers' spend since the flush); the ratios say what grouping and exactness
  up to now add;
* ``HubLedger.totals(user, now)`` (one user's, what each report's reply carries) and one
  ``HubLedger.flush`` of the 1,000 running servers after each reported once.

Prints a markdown table (and the JSON with ``--out``). Bounded: about 30 s with the
defaults on SQLite, about a minute more with ``--postgres``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from jupyter_gpucost.core.billing import BillingRule  # noqa: E402
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog  # noqa: E402
from jupyter_gpucost.core.hub_protocol import SpendReport  # noqa: E402
from jupyter_gpucost.hub.accounting import allocated_by_day  # noqa: E402
from jupyter_gpucost.hub.allocation import price  # noqa: E402
from jupyter_gpucost.hub.ledger import HubLedger, daily_table, rates_table, servers_table  # noqa: E402
from jupyter_gpucost.hub.ledger.schema import to_us  # noqa: E402
from jupyter_gpucost.hub.model import GpuAllocation  # noqa: E402

TARGET_MS = 200.0
#: priced from the shipped catalog, so each session row carries a real rate source
_POLICY = PricePolicy(load_catalog())
RATES = (
    price(GpuAllocation("A100-80GB", 2), _POLICY, setting="benchmark"),
    price(GpuAllocation("T4", 1), _POLICY, setting="benchmark"),
)
#: (start hour, hours) of each day's sessions
SESSIONS = ((9, 2), (14, 3), (19, 1), (7, 1))


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def fill(url: str, users: int, days: int, per_day: int, now: datetime) -> dict[str, Any]:
    """Write the month in bulk; the last day's last session of each user is left running."""
    billing = BillingRule()
    ledger = HubLedger(url)  # creates the schema
    ledger.close()
    engine = sa.create_engine(url)
    first = now.replace(hour=0) - timedelta(days=days - 1)
    servers: list[dict[str, Any]] = []
    daily: list[dict[str, Any]] = []
    running = 0
    t0 = time.perf_counter()
    for u in range(users):
        user = f"user{u:04d}"
        rate = RATES[u % 2]
        for d in range(days):
            for s, (hour, hours) in enumerate(SESSIONS[:per_day]):
                started = first + timedelta(days=d, hours=hour)
                stopped: datetime | None = started + timedelta(hours=hours)
                assert stopped is not None
                if stopped > now:
                    continue
                if d == days - 1 and s == per_day - 1:
                    stopped = None  # still running
                    running += 1
                sid = len(servers) + 1
                until = stopped or now - timedelta(minutes=1)
                servers.append(
                    {
                        "id": sid,
                        "user_name": user,
                        "server_name": "",
                        "started_us": to_us(started),
                        "stopped_us": None if stopped is None else to_us(stopped),
                        "last_seen_us": to_us(until),
                        "profile": "a100-2" if u % 2 == 0 else "t4",
                        "rate_id": u % 2 + 1,
                        "report_session": f"s{sid}",
                        "report_cost_micro_usd": 0,
                        "report_idle_micro_usd": 0,
                    }
                )
                reported_total = 0
                for day, allocated in allocated_by_day(rate, billing, started, until, UTC).items():
                    reported = allocated * 11 // 10 if sid % 3 == 0 else allocated * 6 // 10
                    reported_total += reported
                    daily.append(
                        {
                            "server_id": sid,
                            "day": day,
                            "user_name": user,
                            "allocated_micro_usd": allocated,
                            "reported_micro_usd": reported,
                            "idle_micro_usd": reported // 3,
                            "billed_micro_usd": max(allocated, reported),
                        }
                    )
                servers[-1]["report_cost_micro_usd"] = reported_total
    with engine.begin() as conn:
        conn.execute(
            rates_table.insert(),
            [
                {
                    "id": i + 1,
                    "gpu_model": r.allocation.model,
                    "gpu_count": r.allocation.count,
                    "usd_per_gpu_hour": str(r.usd_per_gpu_hour),
                    "source": r.source,
                }
                for i, r in enumerate(RATES)
            ],
        )
        for i in range(0, len(servers), 5000):
            conn.execute(servers_table.insert(), servers[i : i + 5000])
        for i in range(0, len(daily), 5000):
            conn.execute(daily_table.insert(), daily[i : i + 5000])
    fill_s = time.perf_counter() - t0
    engine.dispose()
    return {"servers": len(servers), "day_rows": len(daily), "running": running, "fill_s": fill_s}


def size_bytes(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            return Path(str(engine.url.database)).stat().st_size
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text(
                        "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                        "WHERE c.relname IN ('hub_rates', 'hub_servers', 'hub_daily', 'hub_meta')"
                    )
                ).scalar()
                or 0
            )
    finally:
        engine.dispose()


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    now = datetime(2026, 11, 30, 20, 30, tzinfo=UTC)
    filled = fill(url, args.users, args.days, args.sessions_per_day, now)
    size = size_bytes(url)
    t0 = time.perf_counter()
    ledger = HubLedger(url)  # takes the running servers up again, as after a restart
    reopen_s = time.perf_counter() - t0
    running = ledger.running()
    for row in running:
        rep = SpendReport(f"s{row.server_id}", "", row.started, now, 10**9, 0, 1)
        ledger.add_report(row.server_id, rep, now - timedelta(seconds=5))
    t0 = time.perf_counter()
    ledger.flush(now - timedelta(seconds=1))
    flush_s = time.perf_counter() - t0
    everyone = ledger.all_totals(now)
    assert len(everyone) == args.users, len(everyone)
    all_totals = timed(lambda: ledger.all_totals(now), args.repeats)
    one = timed(lambda: ledger.totals("user0500", now), args.repeats)
    peer_sql = sa.text("SELECT count(*), sum(billed_micro_usd) FROM hub_daily")
    group_sql = sa.text(
        "SELECT user_name, sum(CASE WHEN day = :today THEN billed_micro_usd ELSE 0 END), "
        "sum(billed_micro_usd) FROM hub_daily WHERE day >= :first AND day <= :today "
        "GROUP BY user_name"
    ).bindparams(today=now.date(), first=now.date().replace(day=1))
    with ledger.engine.connect() as conn:
        conn.execute(peer_sql).all()
        peer = timed(lambda: conn.execute(peer_sql).all(), args.repeats)
        grouped = timed(lambda: conn.execute(group_sql).all(), args.repeats)
    ledger.close()
    user_months = args.users * args.days / 30
    return {
        "backend": sa.engine.make_url(url).get_backend_name(),
        **filled,
        "reopen_s": reopen_s,
        "ledger_bytes": size,
        "bytes_per_user_month": size / user_months,
        "flush_1000_running_ms": flush_s * 1e3,
        "all_totals_ms_median": statistics.median(all_totals) * 1e3,
        "all_totals_ms_p99": sorted(all_totals)[int(0.99 * (len(all_totals) - 1))] * 1e3,
        "totals_one_user_ms_median": statistics.median(one) * 1e3,
        "peer_count_sum_ms_median": statistics.median(peer) * 1e3,
        "all_totals_over_peer": statistics.median(all_totals) / statistics.median(peer),
        "raw_group_by_ms_median": statistics.median(grouped) * 1e3,
        "all_totals_over_raw_group_by": statistics.median(all_totals) / statistics.median(grouped),
        "month_usd_all_users": sum(t.month_micro_usd for t in everyone.values()) / 1e6,
    }


def table(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"{args.users} users × {args.days} days × {args.sessions_per_day} sessions a day, "
        f"{results[0]['running']} servers running",
        "",
        "| Figure | " + " | ".join(r["backend"] for r in results) + " | Target |",
        "| --- | " + " | ".join("---:" for _ in results) + " | --- |",
    ]

    def row(label: str, fmt: Callable[[dict[str, Any]], str], target: str = "") -> None:
        lines.append(f"| {label} | " + " | ".join(fmt(r) for r in results) + f" | {target} |")

    row("server sessions / day rows", lambda r: f"{r['servers']:,} / {r['day_rows']:,}")
    row("ledger size", lambda r: f"{r['ledger_bytes'] / 1e6:.1f} MB")
    row("**bytes per user-month**", lambda r: f"**{r['bytes_per_user_month']:,.0f}**")
    row(
        "**`all_totals(now)`**, median / p99",
        lambda r: f"**{r['all_totals_ms_median']:.1f}** / {r['all_totals_ms_p99']:.1f} ms",
        f"≤ {TARGET_MS:.0f} ms",
    )
    row(
        "peer: `SELECT count(*), sum(...)` over the day table, median",
        lambda r: f"{r['peer_count_sum_ms_median']:.1f} ms",
    )
    row("**`all_totals` / peer**", lambda r: f"**{r['all_totals_over_peer']:.2f}**")
    row(
        "the same month sums in raw SQL (`GROUP BY user_name`, flushed rows only), median",
        lambda r: f"{r['raw_group_by_ms_median']:.1f} ms",
    )
    row("`all_totals` / raw `GROUP BY`", lambda r: f"{r['all_totals_over_raw_group_by']:.2f}")
    row("`totals(user, now)`, median", lambda r: f"{r['totals_one_user_ms_median']:.2f} ms")
    row("one `flush` of the running servers", lambda r: f"{r['flush_1000_running_ms']:.0f} ms")
    row("reopen (running servers taken up again)", lambda r: f"{r['reopen_s'] * 1e3:.0f} ms")
    row("bulk fill", lambda r: f"{r['fill_s']:.1f} s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--sessions-per-day", type=int, default=2, choices=range(1, 5))
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(measure(f"sqlite:///{Path(tmp) / 'hub.sqlite'}", args))
        if args.postgres:
            sys.path.insert(0, str(REPO_ROOT / "tests"))
            from postgres import Postgres

            server = Postgres()
            server.start()
            try:
                results.append(measure(server.new_database(), args))
            finally:
                server.stop()
    print(table(results, args))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
