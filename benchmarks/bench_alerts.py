"""Benchmark: a dead alert target does not slow the hub's enforcement loop or its flush.

In this process: a hub ledger (SQLite in a temporary folder) with N users' running servers,
every user past a tiny day budget, so each poll finds every server at 50, 80 and 100 % of
it: N x 3 alerts on the first poll (a flood: the dispatcher's queue of 500 takes what it
can and drops the rest, logged), none after (each key is sent once). Each scenario times,
median of 7 rounds after the first:

- ``HubService.sync`` over the N servers followed by ``HubAlerts.after_poll`` (what the
  poll's worker thread runs), and the first round alone (the flood);
- ``HubLedger.flush`` (the flush every 30 s), while deliveries are in flight;
- the longest single ``AlertDispatcher.submit`` (what the event loop of a single server
  pays per alert).

Scenarios: no targets; a live receiver (an HTTP server on loopback answering 200); a dead
target that accepts connections and never answers (each try waits for its timeout, 10 s,
then retries with backoff); a closed port (refused at once, retried with backoff).

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_alerts.py [--users 1000] [--out r.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import socket
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from jupyter_gpucost.alerts.dispatch import AlertDispatcher, DispatchSettings
from jupyter_gpucost.alerts.targets import parse_targets
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.hub.alerting import HubAlerts, HubNotify
from jupyter_gpucost.hub.allocation import AllocationPolicy
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.model import ServerInfo
from jupyter_gpucost.hub.service import HubService


class Ok(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def blackhole() -> tuple[socket.socket, int]:
    """A listener that accepts (the kernel's backlog) and never reads nor answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1024)
    return s, int(s.getsockname()[1])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scenario(name: str, urls: list[str], users: int, folder: Path) -> dict[str, Any]:
    ledger = HubLedger(f"sqlite:///{folder / f'{name}.sqlite'}")
    allocation = AllocationPolicy(None, "A100-80GB x 2", PricePolicy(load_catalog()))
    service = HubService(
        ledger, allocation.rate_for, HubBudgetPolicy({"*": {"day": 0.01}}, {}), HubEnforcer(300)
    )
    started = datetime.now(UTC) - timedelta(hours=1)
    servers = [ServerInfo(f"user{i:04d}", "", started, True) for i in range(users)]
    service.sync(servers, datetime.now(UTC))
    ledger.flush(datetime.now(UTC))
    targets = tuple(parse_targets(urls, "bench"))
    notify = HubNotify(users={f"user{i:04d}": targets for i in range(users)})
    dispatcher = AlertDispatcher(DispatchSettings(), log=logging.getLogger("bench.quiet"))
    slowest_submit = [0.0]
    submit = dispatcher.submit

    def timed_submit(*args: Any, **kwargs: Any) -> bool:
        t0 = time.perf_counter()
        try:
            return submit(*args, **kwargs)
        finally:
            slowest_submit[0] = max(slowest_submit[0], time.perf_counter() - t0)

    dispatcher.submit = timed_submit  # type: ignore[method-assign]
    alerts = HubAlerts(notify, dispatcher, tz=ZoneInfo("UTC"))
    rounds, flushes = [], []
    first_ms = 0.0
    for n in range(8):
        now = datetime.now(UTC)
        t0 = time.perf_counter()
        service.sync(servers, now)
        alerts.after_poll(((s.row, s.budgets) for s in service.state.values()), {}, now)
        elapsed = time.perf_counter() - t0
        if n == 0:
            first_ms = elapsed * 1000
        else:
            rounds.append(elapsed)
        t0 = time.perf_counter()
        ledger.flush(datetime.now(UTC))
        flushes.append(time.perf_counter() - t0)
    in_flight = not dispatcher.wait_idle(0)
    dispatcher.close()
    ledger.close()
    return {
        "scenario": name,
        "sync_and_alerts_ms": statistics.median(rounds) * 1000,
        "first_round_ms": first_ms,
        "flush_ms": statistics.median(flushes) * 1000,
        "slowest_submit_us": slowest_submit[0] * 1e6,
        "deliveries_still_in_flight": in_flight,
        "failed_so_far": len(dispatcher.failed()),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("bench.quiet").setLevel(logging.CRITICAL)
    live = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=live.serve_forever, daemon=True).start()
    hole, hole_port = blackhole()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, urls in (
            ("no targets", []),
            ("live receiver", [f"webhook://127.0.0.1:{live.server_address[1]}/a"]),
            ("dead: never answers", [f"webhook://127.0.0.1:{hole_port}/a"]),
            ("dead: port closed", [f"webhook://127.0.0.1:{closed_port()}/a"]),
        ):
            if not urls:
                # no targets: after_poll finds nowhere to send and queues nothing
                pass
            results.append(scenario(name, urls, args.users, Path(tmp)))
    live.shutdown()
    hole.close()
    report = {
        "users": args.users,
        "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
        "results": results,
    }
    print(
        f"{'scenario':24} {'sync+alerts ms':>15} {'1st round ms':>13} {'flush ms':>9} "
        f"{'max submit us':>14} {'in flight':>10}"
    )
    for r in results:
        print(
            f"{r['scenario']:24} {r['sync_and_alerts_ms']:15.1f} {r['first_round_ms']:13.1f} "
            f"{r['flush_ms']:9.1f} {r['slowest_submit_us']:14.1f} "
            f"{r['deliveries_still_in_flight']!s:>10}"
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
