"""How big the ledger grows and how fast its totals are read.

    python benchmarks/bench_ledger.py [--days 30] [--gpus 1] [--out results.json]

Fills a fresh SQLite ledger with ``--days`` of one session sampled at 1 Hz, through the
same rollups the server writes (one spend row per minute, one row per GPU and minute),
then measures:

* the file size, against the same period stored as raw 1 Hz rows (one row per GPU and
  second: the peer design this ledger avoids; one day is written and scaled up);
* the time of the query behind `today_usd` / `month_usd` / `all_time_usd`
  (``Ledger.totals``), against a bare ``SELECT 1`` on the same engine, as a ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from jupyter_gpucost.server.ledger import Ledger, gpu_minutes_table, minute_of


def timed(fn, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "ledger.sqlite"
    ledger = Ledger(f"sqlite:///{path}")
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    start = now - timedelta(days=args.days)
    ledger.start_session("bench", start, "bench")
    first = minute_of(start.timestamp())
    minutes = range(first, minute_of(now.timestamp()), 60)
    t0 = time.perf_counter()
    # one minute at 6.862 $/h is 114,367 micro-dollars; a third of it idle
    ledger.bulk_spend("bench", ((m, 114_367, 38_122, 6_862_000) for m in minutes))
    with ledger.engine.begin() as conn:
        conn.execute(
            gpu_minutes_table.insert(),
            [
                {
                    "session_id": "bench",
                    "gpu_index": g,
                    "minute_unix_s": m,
                    "utilization_pct_sum": 60 * 97.0,
                    "power_w_sum": 60 * 391.2,
                    "samples": 60,
                    "memory_used_bytes_max": 61_203_267_584,
                }
                for m in minutes
                for g in range(args.gpus)
            ],
        )
    fill_s = time.perf_counter() - t0
    with ledger.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size

    # the peer design: raw 1 Hz rows, one per GPU and second (one day, scaled up)
    raw_path = tmp / "raw.sqlite"
    raw = sa.create_engine(f"sqlite:///{raw_path}")
    raw_table = sa.Table(
        "raw",
        sa.MetaData(),
        sa.Column("session_id", sa.String(64)),
        sa.Column("gpu_index", sa.Integer),
        sa.Column("unix_s", sa.Float),
        sa.Column("cost_micro_usd", sa.BigInteger),
        sa.Column("utilization_pct", sa.Float),
        sa.Column("power_w", sa.Float),
        sa.Column("memory_used_bytes", sa.BigInteger),
    )
    raw_table.metadata.create_all(raw)
    with raw.begin() as conn:
        conn.execute(
            raw_table.insert(),
            [
                {
                    "session_id": "bench",
                    "gpu_index": g,
                    "unix_s": start.timestamp() + s,
                    "cost_micro_usd": 1906,
                    "utilization_pct": 97.0,
                    "power_w": 391.2,
                    "memory_used_bytes": 61_203_267_584,
                }
                for s in range(86_400)
                for g in range(args.gpus)
            ],
        )
    raw_size_day = raw_path.stat().st_size
    raw_size = raw_size_day * args.days

    totals = timed(lambda: ledger.totals(now, exclude_session="other"), 200)
    with ledger.engine.connect() as conn:
        floor = timed(lambda: conn.execute(sa.text("SELECT 1")).scalar(), 200)
    result = {
        "days": args.days,
        "gpus": args.gpus,
        "spend_rows": len(minutes),
        "ledger_bytes": size,
        "ledger_mb": round(size / 1e6, 2),
        "raw_1hz_bytes_estimated": raw_size,
        "raw_1hz_mb_estimated": round(raw_size / 1e6, 1),
        "ledger_over_raw": round(size / raw_size, 4),
        "fill_s": round(fill_s, 2),
        "totals_query_ms_median": round(statistics.median(totals) * 1e3, 3),
        "totals_query_ms_p99": round(sorted(totals)[197] * 1e3, 3),
        "select1_ms_median": round(statistics.median(floor) * 1e3, 4),
        "totals_over_select1": round(statistics.median(totals) / statistics.median(floor), 1),
        "check_all_time_usd": ledger.totals(now).all_time_micro_usd / 1e6,
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
