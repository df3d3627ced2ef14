"""``jupyter gpucost reconcile`` on a large FOCUS Parquet file, against a plain read.

Writes a synthetic FOCUS 1.2 Parquet file (hourly compute rows of many resources, as a
month of a mid-size organisation's bill; three of them the ledger's machines), then, each
in a child process of its own so that peak memory is its own:

* **plain read**: pyarrow reads the same columns of the whole file, batch by batch;
* **reconcile**: :func:`read_bill` and :func:`match`, as the command runs them.

It prints the seconds and peak resident memory of each and the ratio, as JSON::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_reconcile.py            # 1 million rows
    PYTHONPATH=. .venv/bin/python benchmarks/bench_reconcile.py --rows 10000000
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

#: the ledger's three machines
MACHINES = ["i-0a5b7c9d1e3f50000", "i-0a5b7c9d1e3f50001", "i-0a5b7c9d1e3f50002"]
START = datetime(2026, 10, 1, tzinfo=UTC)


def write_bill(path: Path, rows: int, chunk: int = 1_000_000) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    resources = max(rows // 720, 10)  # a month of hours per resource
    rng = np.random.default_rng(7)
    schema = pa.schema(
        [
            ("ResourceId", pa.string()),
            ("ChargePeriodStart", pa.timestamp("us", tz="UTC")),
            ("ChargePeriodEnd", pa.timestamp("us", tz="UTC")),
            ("BilledCost", pa.decimal128(38, 10)),
            ("EffectiveCost", pa.decimal128(38, 10)),
            ("ListCost", pa.decimal128(38, 10)),
            ("BillingCurrency", pa.string()),
            ("ChargeCategory", pa.string()),
            ("ChargeClass", pa.string()),
            ("SkuPriceId", pa.string()),
            ("ServiceName", pa.string()),
            ("RegionId", pa.string()),
        ]
    )
    names = np.array([f"i-{n:017x}" for n in range(resources)], dtype=object)
    names[: len(MACHINES)] = MACHINES
    with pq.ParquetWriter(path, schema) as writer:
        for first in range(0, rows, chunk):
            n = min(chunk, rows - first)
            index = np.arange(first, first + n)
            resource_ids = names[index % resources]
            hours = index // resources
            starts = np.datetime64(START.replace(tzinfo=None), "us") + hours.astype(
                "timedelta64[h]"
            )
            listed = np.round(rng.uniform(0.05, 40.0, n), 6)
            billed = np.round(listed * 0.72, 6)
            table = pa.table(
                {
                    "ResourceId": pa.array(resource_ids, pa.string()),
                    "ChargePeriodStart": pa.array(starts, pa.timestamp("us", tz="UTC")),
                    "ChargePeriodEnd": pa.array(
                        starts + np.timedelta64(1, "h"), pa.timestamp("us", tz="UTC")
                    ),
                    "BilledCost": pa.array(billed).cast(pa.decimal128(38, 10)),
                    "EffectiveCost": pa.array(billed).cast(pa.decimal128(38, 10)),
                    "ListCost": pa.array(listed).cast(pa.decimal128(38, 10)),
                    "BillingCurrency": pa.array(["USD"] * n),
                    "ChargeCategory": pa.array(["Usage"] * n),
                    "ChargeClass": pa.array([None] * n, pa.string()),
                    "SkuPriceId": pa.array(["SKU.OD.1"] * n),
                    "ServiceName": pa.array(["Amazon Elastic Compute Cloud"] * n),
                    "RegionId": pa.array(["us-east-1"] * n),
                },
                schema=schema,
            )
            writer.write_table(table)


def _plain(path: str, out: multiprocessing.Queue[dict[str, float]]) -> None:
    import pyarrow.dataset as ds

    from jupyter_gpucost.core.focus import CHARGE_KEY_COLUMNS, REQUIRED_COLUMNS

    began = time.perf_counter()
    rows = 0
    dataset = ds.dataset(path, format="parquet")
    for batch in dataset.to_batches(columns=[*REQUIRED_COLUMNS, *CHARGE_KEY_COLUMNS]):
        rows += batch.num_rows
    out.put(_measured(began, rows))


def _reconcile(path: str, out: multiprocessing.Queue[dict[str, float]]) -> None:
    from jupyter_gpucost.core.focus import BilledMachine
    from jupyter_gpucost.reconcile.match import match
    from jupyter_gpucost.reconcile.read import read_bill
    from jupyter_gpucost.server.ledger import LedgerMachine

    machines = [
        LedgerMachine(BilledMachine("aws", instance_id=i, instance_type="g5.xlarge"), "USD")
        for i in MACHINES
    ]
    began = time.perf_counter()
    bill = read_bill(path, {p for m in machines for p in m.machine.last_parts()})
    results = match(bill, machines)
    assert len(results) == len(MACHINES)
    out.put(_measured(began, bill.rows_read))


def _measured(began: float, rows: int) -> dict[str, float]:
    return {
        "seconds": round(time.perf_counter() - began, 3),
        "rows": rows,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _child(target: object, path: str) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[dict[str, float]] = context.Queue()
    process = context.Process(target=target, args=(path, queue))
    process.start()
    result = queue.get(timeout=3600)
    process.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", help="also write the result here (JSON)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "focus.parquet"
        began = time.perf_counter()
        write_bill(path, args.rows)
        written = time.perf_counter() - began
        plain = _child(_plain, str(path))
        reconcile = _child(_reconcile, str(path))
        result = {
            "rows": args.rows,
            "file_mib": round(path.stat().st_size / 2**20, 1),
            "write_s": round(written, 1),
            "plain_read": plain,
            "reconcile": reconcile,
            "ratio": round(reconcile["seconds"] / plain["seconds"], 2),
        }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
