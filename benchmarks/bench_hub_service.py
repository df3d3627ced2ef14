"""Benchmark: the gpucost hub service under 1,000 users' servers reporting every 10 s.

What runs (all on 127.0.0.1):

- **the service**, ``python -m jupyter_gpucost.hub`` in a subprocess, with its SQLite
  ledger in a temporary directory, a month budget for everyone, polling every 10 s and
  flushing every 30 s (its defaults);
- **a fake hub** in this process: a small tornado app that answers the three Hub API calls
  the service makes (``GET /users?state=active`` paginated, ``GET /user`` for a token,
  ``DELETE`` a server) for N users with one running server each. It is a stand-in for the
  benchmark only: the service's tests run against a real JupyterHub;
- **a peer** in a second subprocess: bare tornado handlers that parse the same report and
  return a same-sized reply, and return the same admin JSON (precomputed), with no
  authentication, ledger or budgets. It is the floor of what a tornado process costs for
  the same traffic, so the service's figures are also given as ratios to it.

The clients (this process) send each user's report every 10 s, spread evenly, for the
duration; the first 10 s (every token looked up once, every connection opened) are a
warm-up. Each user's server has one kept-alive HTTP/1.1 connection, as the servers'
reporter (``server/hub_link.py``) has: opened at its first report, opened again once if the
other end dropped it. Measured:

- the service's CPU (user + system of its process, psutil) as % of one core, and the peer's;
- report latency p50 / p99 (client side, the same client for both);
- ``GET api/admin/summary`` for N users (median of 20), against the peer's same JSON;
- the enforcement loop: ``HubService.sync`` over N running servers in this process (a
  ledger in a temporary SQLite file, the same budgets), against ``ledger.all_totals``
  alone, the one query it cannot do without.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_hub_service.py [--users 1000]
        [--duration 60] [--out results.json] [--together]

By default the service is loaded first, then the peer, each for the duration; on a
machine shared with other busy processes the two windows may see different loads, and
``--together`` loads both in the same window (each with its own clients, the same
schedule) so that both see the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
PERIOD_S = 10.0
WARMUP_S = 10.0
ADMIN_TOKEN = "admin-" + secrets.token_hex(8)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def user_name(i: int) -> str:
    return f"user{i:04d}"


# -- the fake hub ---------------------------------------------------------------------------


class FakeHub:
    def __init__(self, users: int, service_token: str) -> None:
        self.users = users
        self.service_token = service_token
        self.started = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
        self.calls: dict[str, int] = {"list": 0, "user": 0, "delete": 0}

    def user_model(self, i: int) -> dict[str, Any]:
        return {
            "kind": "user",
            "name": user_name(i),
            "groups": [f"team{i % 20:02d}"],
            "servers": {
                "": {
                    "name": "",
                    "started": self.started,
                    "ready": True,
                    "stopped": False,
                    "user_options": {},
                }
            },
        }


class HubHandler(web.RequestHandler):
    @property
    def hub(self) -> FakeHub:
        hub: FakeHub = self.settings["hub"]
        return hub

    def token(self) -> str:
        return self.request.headers.get("Authorization", "").partition(" ")[2]


class UsersHandler(HubHandler):
    def get(self) -> None:
        if self.token() != self.hub.service_token:
            raise web.HTTPError(403)
        self.hub.calls["list"] += 1
        offset = int(self.get_argument("offset", "0"))
        limit = int(self.get_argument("limit", "200"))
        items = [self.hub.user_model(i) for i in range(offset, min(offset + limit, self.hub.users))]
        following = None
        if offset + limit < self.hub.users:
            following = {"offset": offset + limit, "limit": limit}
        self.finish({"items": items, "_pagination": {"next": following}})


class WhoHandler(HubHandler):
    def get(self) -> None:
        self.hub.calls["user"] += 1
        token = self.token()
        if token == ADMIN_TOKEN:
            model = {"kind": "user", "name": "boss", "admin": True, "groups": [], "scopes": []}
        elif token.startswith("tok-"):
            name = token[4:]
            # as the Hub names a server token granted the report scope
            scopes = [f"custom:gpucost:report!user={name}"]
            model = {"kind": "user", "name": name, "admin": False, "groups": [], "scopes": scopes}
        else:
            raise web.HTTPError(403)
        self.finish(model)


class ServerHandler(HubHandler):
    def delete(self, name: str) -> None:
        self.hub.calls["delete"] += 1
        self.set_status(204)


def fake_hub(hub: FakeHub, port: int) -> HTTPServer:
    app = web.Application(
        [
            (r"/hub/api/users", UsersHandler),
            (r"/hub/api/user", WhoHandler),
            (r"/hub/api/users/([^/]+)/server", ServerHandler),
        ],
        hub=hub,
    )
    server = HTTPServer(app)
    server.listen(port, HOST)
    return server


# -- the peer -------------------------------------------------------------------------------

PEER = """
import json, sys
from tornado import ioloop, web

summary = None
reply = json.dumps({"version": 1, "user": "user0000", "session_micro_usd": 123456,
    "today_micro_usd": 123456, "month_micro_usd": 123456, "budgets": [{"scope": "month",
    "amount_micro_usd": 1000000000, "spent_micro_usd": 123456, "source": "user"}],
    "stop_at": None, "reason": None})

class Report(web.RequestHandler):
    def check_xsrf_cookie(self):
        pass
    def post(self):
        json.loads(self.request.body)
        self.set_header("Content-Type", "application/json")
        self.finish(reply)

class Summary(web.RequestHandler):
    def get(self):
        global summary
        if summary is None:  # read once, at the first GET (written by then)
            summary = open(sys.argv[2]).read()
        self.set_header("Content-Type", "application/json")
        self.finish(summary)

web.Application([(r"/api/report", Report), (r"/api/admin/summary", Summary)]).listen(
    int(sys.argv[1]), "127.0.0.1")
ioloop.IOLoop.current().start()
"""


# -- load -----------------------------------------------------------------------------------


def report_body(i: int, started: str) -> bytes:
    now = datetime.now(UTC).isoformat()
    return json.dumps(
        {
            "version": 1,
            "session_id": f"s-{i}",
            "server_name": "",
            "started": started,
            "sent": now,
            "cost_micro_usd": 1000 + i,
            "idle_micro_usd": 100,
            "rate_micro_usd_per_s": 1906,
            "energy_wh": 12.5,
            "cells": 3,
            "kernels": [{"kernel_id": f"k-{i}", "name": "python3", "cost_micro_usd": 900}],
            "gpu_models": ["A100-80GB", "A100-80GB"],
        }
    ).encode()


class KeptAlive:
    """One server's connection to the report URL, kept alive between reports like the
    reporter's ``http.client`` connection: the same request line and headers, the reply
    read by its Content-Length; opened again once when the other end dropped it."""

    def __init__(self, url: str, token: str) -> None:
        split = urlsplit(url)
        self.host, self.port = split.hostname or HOST, split.port or 80
        self.head = (
            f"POST {split.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Accept-Encoding: identity\r\nContent-Type: application/json\r\n"
            f"Authorization: token {token}\r\n"
        ).encode()
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.opened = 0

    async def post(self, body: bytes) -> tuple[int, bytes]:
        request = self.head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        for attempt in (1, 2):
            reused = self.streams is not None
            if self.streams is None:
                self.streams = await asyncio.open_connection(self.host, self.port)
                self.opened += 1
            reader, writer = self.streams
            try:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if reused and attempt == 1:
                    continue
                raise
            lines = head.decode("latin-1").split("\r\n")
            code = int(lines[0].split()[1])
            fields = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            reply = await reader.readexactly(int(fields["content-length"]))
            if fields.get("connection", "").lower() == "close":
                self.close()
            return code, reply
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


async def load(url: str, users: int, duration_s: float, started: str, pid: int) -> dict[str, Any]:
    """Every user's report every PERIOD_S, spread evenly, each user's on its own kept-alive
    connection; latencies after the warm-up and the process's CPU over the measured window."""
    clients = [KeptAlive(url, f"tok-{user_name(i)}") for i in range(users)]
    busy = [asyncio.Lock() for _ in range(users)]
    latencies: list[float] = []
    errors: dict[int | str, int] = {}
    begin = time.monotonic()
    measured_from = begin + WARMUP_S
    end = begin + duration_s
    process = psutil.Process(pid)
    cpu_start: float | None = None
    wall_start = 0.0
    tasks: set[asyncio.Task[None]] = set()

    async def send(i: int) -> None:
        # one report at a time per server, as the reporter's one thread sends them
        async with busy[i]:
            t0 = time.perf_counter()
            try:
                code, _ = await asyncio.wait_for(
                    clients[i].post(report_body(i, started)), timeout=30
                )
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as e:
                clients[i].close()
                name = type(e).__name__
                errors[name] = errors.get(name, 0) + 1
                return
            elapsed = time.perf_counter() - t0
        if code != 200:
            errors[code] = errors.get(code, 0) + 1
        elif time.monotonic() >= measured_from:
            latencies.append(elapsed)

    n = 0
    step = PERIOD_S / users
    while True:
        at = begin + n * step
        if at >= end:
            break
        if cpu_start is None and at >= measured_from:
            times = process.cpu_times()
            cpu_start, wall_start = times.user + times.system, time.monotonic()
        delay = at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(send(n % users))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
    await asyncio.gather(*tasks)
    times = process.cpu_times()
    cpu_s = times.user + times.system - (cpu_start or 0.0)
    wall_s = time.monotonic() - wall_start
    connections = sum(c.opened for c in clients)
    for c in clients:
        c.close()
    latencies.sort()
    return {
        "requests": n,
        "measured": len(latencies),
        "errors": errors,
        "connections": connections,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(0.99 * (len(latencies) - 1))] * 1000,
        "max_ms": latencies[-1] * 1000,
        "cpu_percent_of_one_core": 100 * cpu_s / wall_s,
    }


async def timed_get(url: str, token: str | None, rounds: int = 20) -> tuple[float, str]:
    client = AsyncHTTPClient()
    headers = {"Authorization": f"token {token}"} if token else {}
    times = []
    body = ""
    for _ in range(rounds):
        t0 = time.perf_counter()
        response = await client.fetch(HTTPRequest(url, headers=headers, request_timeout=60))
        times.append(time.perf_counter() - t0)
        body = response.body.decode()
    return statistics.median(times) * 1000, body


# -- the enforcement loop in this process ---------------------------------------------------


def enforcement(users: int, folder: Path) -> dict[str, float]:
    from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
    from jupyter_gpucost.hub.allocation import AllocationPolicy
    from jupyter_gpucost.hub.budgets import HubBudgetPolicy
    from jupyter_gpucost.hub.enforcer import HubEnforcer
    from jupyter_gpucost.hub.ledger import HubLedger
    from jupyter_gpucost.hub.model import ServerInfo
    from jupyter_gpucost.hub.service import HubService

    ledger = HubLedger(f"sqlite:///{folder / 'enforce.sqlite'}")
    allocation = AllocationPolicy(None, "A100-80GB x 2", PricePolicy(load_catalog()))
    service = HubService(
        ledger,
        allocation.rate_for,
        HubBudgetPolicy(
            {"*": {"month": 1000}}, {f"team{g:02d}": {"month": 5000} for g in range(20)}
        ),
        HubEnforcer(300),
    )
    started = datetime.now(UTC) - timedelta(hours=1)
    servers = [
        ServerInfo(user_name(i), "", started, True, groups=(f"team{i % 20:02d}",))
        for i in range(users)
    ]
    service.sync(servers, datetime.now(UTC))  # opens every row
    ledger.flush(datetime.now(UTC))
    syncs, totals = [], []
    for _ in range(7):
        now = datetime.now(UTC)
        t0 = time.perf_counter()
        service.sync(servers, now)
        service.due(now)
        syncs.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ledger.all_totals(now)
        totals.append(time.perf_counter() - t0)
    ledger.close()
    return {
        "sync_ms": statistics.median(syncs) * 1000,
        "all_totals_ms": statistics.median(totals) * 1000,
    }


# -- main -----------------------------------------------------------------------------------


def wait_up(url: str, what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise RuntimeError(f"{what} did not start:\n{log.read_text()[-3000:]}")


def launch(
    command: list[str], log: Path, cwd: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


async def bench(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    service_token = secrets.token_hex(16)
    hub_port, svc_port, peer_port = free_port(), free_port(), free_port()
    hub = FakeHub(args.users, service_token)
    hub_server = fake_hub(hub, hub_port)
    config = tmp / "gpucost_hub_config.py"
    config.write_text(
        textwrap.dedent(
            f"""
            c.GpuCostHub.default_gpu = "A100-80GB x 2"
            c.GpuCostHub.user_budgets = {{"*": {{"month": 1000}}}}
            c.GpuCostHub.group_budgets = {{f"team{{g:02d}}": {{"month": 5000}} for g in range(20)}}
            c.GpuCostHub.data_dir = "{tmp / "data"}"
            c.GpuCostHub.bind_url = "http://{HOST}:{svc_port}"
            c.GpuCostHub.base_url = "/services/gpucost/"
            c.GpuCostHub.hub_api_url = "http://{HOST}:{hub_port}/hub/api"
            """
        )
    )
    env = {**os.environ, "JUPYTERHUB_API_TOKEN": service_token, "PYTHONPATH": str(REPO_ROOT)}
    for name in ("JUPYTERHUB_SERVICE_NAME", "JUPYTERHUB_OAUTH_ACCESS_SCOPES"):
        env.pop(name, None)
    svc_log = tmp / "service.log"
    peer_log = tmp / "peer.log"
    base = f"http://{HOST}:{svc_port}/services/gpucost/"
    service = launch(
        [sys.executable, "-m", "jupyter_gpucost.hub", "--config", str(config)], svc_log, tmp, env
    )
    peer = None
    try:
        await asyncio.get_running_loop().run_in_executor(
            None, wait_up, base + "api/me", "the service", service, svc_log
        )
        result: dict[str, Any] = {"together": args.together}
        peer = launch(
            [sys.executable, "-c", PEER, str(peer_port), str(tmp / "summary.json")],
            peer_log,
            tmp,
            dict(os.environ),
        )
        await asyncio.get_running_loop().run_in_executor(
            None, wait_up, f"http://{HOST}:{peer_port}/api/report", "the peer", peer, peer_log
        )
        service_load = load(
            base + "api/report", args.users, args.duration, hub.started, service.pid
        )
        peer_load = load(
            f"http://{HOST}:{peer_port}/api/report",
            args.users,
            args.duration,
            hub.started,
            peer.pid,
        )
        if args.together:
            # both loaded in the same window: a machine shared with other work slows both
            result["service"], result["peer"] = await asyncio.gather(service_load, peer_load)
        else:
            result["service"] = await service_load
        summary_ms, summary = await timed_get(base + "api/admin/summary", ADMIN_TOKEN)
        doc = json.loads(summary)
        assert len(doc["users"]) == args.users, len(doc["users"])
        (tmp / "summary.json").write_text(summary)
        if not args.together:
            result["peer"] = await peer_load
        peer_ms, _ = await timed_get(f"http://{HOST}:{peer_port}/api/admin/summary", None)
        result["summary_ms"] = summary_ms
        result["summary_bytes"] = len(summary)
        result["peer_summary_ms"] = peer_ms
        result["hub_calls"] = dict(hub.calls)
        errors = [line for line in svc_log.read_text().splitlines() if line.startswith("[E")]
        result["service_log_errors"] = errors[:20]
        return result
    finally:
        stop(service)
        if peer is not None:
            stop(peer)
        hub_server.stop()


def table(r: dict[str, Any], users: int, duration: float) -> str:
    s, p, e = r["service"], r["peer"], r["enforcement"]
    rows = [
        (
            "Service CPU, % of one core",
            f"{s['cpu_percent_of_one_core']:.1f} %",
            f"{p['cpu_percent_of_one_core']:.1f} %",
            f"{s['cpu_percent_of_one_core'] / p['cpu_percent_of_one_core']:.2f}",
            "≤ 10 %",
        ),
        (
            "Report latency p50",
            f"{s['p50_ms']:.2f} ms",
            f"{p['p50_ms']:.2f} ms",
            f"{s['p50_ms'] / p['p50_ms']:.2f}",
            "",
        ),
        (
            "Report latency p99",
            f"{s['p99_ms']:.2f} ms",
            f"{p['p99_ms']:.2f} ms",
            f"{s['p99_ms'] / p['p99_ms']:.2f}",
            "≤ 50 ms",
        ),
        (
            f"Admin summary, {users} users (median of 20)",
            f"{r['summary_ms']:.1f} ms",
            f"{r['peer_summary_ms']:.1f} ms",
            f"{r['summary_ms'] / r['peer_summary_ms']:.2f}",
            "≤ 200 ms",
        ),
        (
            f"Enforcement loop over {users} running servers (sync + due)",
            f"{e['sync_ms']:.1f} ms",
            f"{e['all_totals_ms']:.1f} ms (all_totals alone)",
            f"{e['sync_ms'] / e['all_totals_ms']:.2f}",
            "",
        ),
    ]
    out = [
        f"{users} users, one report each every {PERIOD_S:.0f} s for {duration:.0f} s "
        f"({s['measured']} reports measured after a {WARMUP_S:.0f} s warm-up, "
        f"errors {s['errors'] or 'none'}; one kept-alive connection per server: "
        f"{s['connections']} opened to the service, {p['connections']} to the peer); "
        f"{platform.processor() or platform.machine()}, "
        f"{psutil.cpu_count()} CPUs, Python {platform.python_version()}",
        "",
        "| What | gpucost hub service | Peer | Ratio | Target |",
        "|---|---|---|---|---|",
    ]
    out += [f"| {a} | {b} | {c} | {d} | {t} |" for a, b, c, d, t in rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--together",
        action="store_true",
        help="load the service and the peer at the same time (the same window of a shared "
        "machine for both) instead of one after the other",
    )
    args = parser.parse_args()
    if args.duration <= WARMUP_S:
        parser.error(f"--duration must be more than the {WARMUP_S:.0f} s warm-up")
    with tempfile.TemporaryDirectory(prefix="bench-hub-") as name:
        tmp = Path(name)
        result = asyncio.run(bench(args, tmp))
        result["enforcement"] = enforcement(args.users, tmp)
    print(table(result, args.users, args.duration))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
