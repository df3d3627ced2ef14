"""Benchmark: jupyter-gpucost's status route against jupyter-resource-usage's metrics route.

One real ``jupyter server`` runs with both extensions; K kernels spin a CPU loop so that
the machine is loaded (and jupyter-resource-usage's psutil walk has processes to walk).
From one client, sequentially and interleaved, the script times:

- ``GET /gpucost/api/status``  (ours: reads the sampler's latest snapshot),
- ``GET /api/metrics/v1``      (jupyter-resource-usage: psutil work on the event loop),
- ``GET /api``                 (jupyter_server's version route: a probe of event-loop stalls).

It also runs the sampler in this process with simulated telemetry and reads its CPU time
per sample from ``Sampler.stats()``, as a share of the 1 s sample interval.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_status.py [--requests N] [--kernels K]
        [--out results.json]

Everything listens on 127.0.0.1; the server, its kernels and its temporary directories
are removed at the end, also on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
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
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"

#: the three routes timed, in the order of the first round (rotated every round)
OURS = "/gpucost/api/status"
THEIRS = "/api/metrics/v1"
PROBE = "/api"
ROUTES = (OURS, THEIRS, PROBE)
LABELS = {
    OURS: "jupyter-gpucost `GET /gpucost/api/status`",
    THEIRS: "jupyter-resource-usage `GET /api/metrics/v1`",
    PROBE: "jupyter_server `GET /api` (event-loop probe)",
}

#: our p99 must be at most this share of the peer's p99
TARGET_P99_RATIO = 0.1
#: the interval the server samples at in the benchmark (and the default of the extension)
SERVER_INTERVAL_S = 1.0

START_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 15.0
BUSY_LOOP = "import time\nt = time.time()\nwhile time.time() - t < 600:\n    sum(range(10000))\n"


class BenchError(RuntimeError):
    """The benchmark could not run; the message says why."""


# -- the machine -----------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, Any]:
    return {
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "memory_gib": round(_memory_bytes() / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "jupyter_server": package_version("jupyter_server"),
        "jupyter_resource_usage": package_version("jupyter-resource-usage"),
        "tornado": package_version("tornado"),
        "psutil": package_version("psutil"),
        "ipykernel": package_version("ipykernel"),
    }


def _memory_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


# -- statistics ------------------------------------------------------------------------


@dataclass(frozen=True)
class Latency:
    n: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float


def latency(samples_s: list[float]) -> Latency:
    ms = sorted(s * 1000 for s in samples_s)
    cuts = statistics.quantiles(ms, n=100, method="inclusive")
    return Latency(
        n=len(ms),
        p50_ms=cuts[49],
        p90_ms=cuts[89],
        p99_ms=cuts[98],
        max_ms=ms[-1],
        mean_ms=statistics.fmean(ms),
    )


# -- the server ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"(no server log: {e})"


class Server:
    """One ``jupyter server`` subprocess with both extensions, in its own session."""

    def __init__(self, tmp: Path, extra_args: list[str]) -> None:
        self.extra_args = extra_args
        self.port = free_port()
        self.token = secrets.token_hex(24)
        self.log_path = tmp / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.tmp = tmp

    def start(self) -> None:
        dirs = {name: self.tmp / name for name in ("config", "data", "runtime", "root", "ipython")}
        for d in dirs.values():
            d.mkdir()
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(dirs["config"]),
            JUPYTER_DATA_DIR=str(dirs["data"]),
            JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
            IPYTHONDIR=str(dirs["ipython"]),
            JUPYTER_PLATFORM_DIRS="1",
            PYTHONPATH=os.pathsep.join(
                p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        )
        env.pop("JUPYTER_TOKEN", None)
        cmd = [
            sys.executable,
            "-m",
            "jupyter_server",
            f"--ServerApp.ip={HOST}",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            "--allow-root",
            "--ServerApp.open_browser=False",
            f"--ServerApp.root_dir={dirs['root']}",
            "--ServerApp.jpserver_extensions="
            "{'jupyter_gpucost': True, 'jupyter_resource_usage': True}",
            "--GpuCost.telemetry=simulated",
            f"--GpuCost.sample_interval_s={SERVER_INTERVAL_S:g}",
            *self.extra_args,
        ]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(
                    f"jupyter server exited with code {self.proc.returncode} while starting; "
                    f"its log ends with:\n{tail(self.log_path)}"
                )
            try:
                status, _ = self.request("GET", PROBE, timeout=2.0)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise BenchError(
            f"jupyter server did not answer on {HOST}:{self.port} within "
            f"{START_TIMEOUT_S:g} s; its log ends with:\n{tail(self.log_path)}"
        )

    def connection(self, timeout: float = REQUEST_TIMEOUT_S) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(HOST, self.port, timeout=timeout)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float = REQUEST_TIMEOUT_S,
        conn: http.client.HTTPConnection | None = None,
    ) -> tuple[int, bytes]:
        own = conn is None
        c = conn or self.connection(timeout)
        try:
            headers = dict(self.headers)
            payload = None
            if body is not None:
                payload = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            c.request(method, path, body=payload, headers=headers)
            response = c.getresponse()
            return response.status, response.read()
        finally:
            if own:
                c.close()

    def descendants(self) -> list[Any]:
        import psutil

        if self.proc is None:
            return []
        try:
            return list(psutil.Process(self.proc.pid).children(recursive=True))
        except psutil.Error:
            return []

    def stop(self) -> None:
        """Stop the server by its handle (SIGTERM, then SIGKILL to its process group)."""
        import psutil

        if self.proc is None or self.proc.poll() is not None:
            return
        children = self.descendants()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        # kernels run in sessions of their own: end any the server left behind, by pid
        # (psutil checks the creation time, so a reused pid is never signalled)
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(children, timeout=5)


# -- kernels ---------------------------------------------------------------------------


def start_kernels(server: Server, count: int) -> list[str]:
    ids: list[str] = []
    for _ in range(count):
        status, body = server.request("POST", "/api/kernels", {"name": "python3"}, timeout=60)
        if status != 201:
            raise BenchError(f"POST /api/kernels answered {status}: {body[:300]!r}")
        ids.append(json.loads(body)["id"])
    return ids


def execute_request(code: str, session: str) -> dict[str, Any]:
    return {
        "header": {
            "msg_id": uuid.uuid4().hex,
            "username": "bench",
            "session": session,
            "msg_type": "execute_request",
            "version": "5.3",
            "date": datetime.now(UTC).isoformat(),
        },
        "parent_header": {},
        "metadata": {},
        "content": {
            "code": code,
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
        "channel": "shell",
        "buffers": [],
    }


async def make_busy(server: Server, kernel_id: str, timeout_s: float = 60.0) -> None:
    """Send the CPU loop to a kernel and wait until its status is busy with it."""
    from tornado.websocket import websocket_connect

    url = f"ws://{HOST}:{server.port}/api/kernels/{kernel_id}/channels?token={server.token}"
    ws = await asyncio.wait_for(websocket_connect(url, connect_timeout=timeout_s), timeout_s)
    try:
        msg = execute_request(BUSY_LOOP, session=uuid.uuid4().hex)
        msg_id = msg["header"]["msg_id"]
        await ws.write_message(json.dumps(msg))
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"kernel {kernel_id} did not start the CPU loop in time")
            raw = await asyncio.wait_for(ws.read_message(), left)
            if raw is None:
                raise BenchError(f"kernel {kernel_id}: websocket closed before it was busy")
            reply = json.loads(raw)
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if reply["msg_type"] == "execute_input":
                return  # the loop is running
            if reply["msg_type"] in ("error", "execute_reply"):
                raise BenchError(f"kernel {kernel_id} did not run the loop: {reply['content']}")
    finally:
        ws.close()


async def make_all_busy(server: Server, kernel_ids: list[str]) -> None:
    await asyncio.gather(*(make_busy(server, k) for k in kernel_ids))


def stop_kernels(server: Server, kernel_ids: list[str]) -> list[str]:
    """Interrupt (ends the loop at once) and delete every kernel; returns what failed."""
    problems: list[str] = []
    for k in kernel_ids:
        with contextlib.suppress(OSError):
            server.request("POST", f"/api/kernels/{k}/interrupt", timeout=10)
    for k in kernel_ids:
        try:
            status, _ = server.request("DELETE", f"/api/kernels/{k}", timeout=30)
            if status != 204:
                problems.append(f"DELETE /api/kernels/{k} answered {status}")
        except OSError as e:
            problems.append(f"DELETE /api/kernels/{k}: {e}")
    return problems


# -- measurements ----------------------------------------------------------------------


def check_routes(server: Server) -> None:
    """Both extensions answer, with what they are supposed to answer."""
    status, body = server.request("GET", OURS)
    if status != 200:
        raise BenchError(f"{OURS} answered {status} (is jupyter_gpucost loaded?): {body[:300]!r}")
    ours = json.loads(body)
    if not ours.get("telemetry", {}).get("simulated"):
        raise BenchError(f"{OURS} does not report simulated telemetry: {ours.get('telemetry')}")
    status, body = server.request("GET", THEIRS)
    if status != 200:
        raise BenchError(
            f"{THEIRS} answered {status} (is jupyter_resource_usage loaded?): {body[:300]!r}"
        )
    if "rss" not in json.loads(body):
        raise BenchError(f"{THEIRS} has no rss field: {body[:300]!r}")


def time_routes(server: Server, requests: int, warmup: int) -> dict[str, list[float]]:
    """Interleaved sequential GETs on one keep-alive connection; seconds per request."""
    times: dict[str, list[float]] = {r: [] for r in ROUTES}
    conn = server.connection()
    headers = server.headers
    try:
        for i in range(warmup + requests):
            shift = i % len(ROUTES)
            for route in ROUTES[shift:] + ROUTES[:shift]:
                t0 = time.perf_counter()
                conn.request("GET", route, headers=headers)
                response = conn.getresponse()
                response.read()
                elapsed = time.perf_counter() - t0
                if response.status != 200:
                    raise BenchError(f"GET {route} answered {response.status}")
                if i >= warmup:
                    times[route].append(elapsed)
    finally:
        conn.close()
    return times


def sampler_cost(samples: int, interval_s: float) -> dict[str, Any]:
    """Run the extension's sampler in this process; CPU time per sample from its stats."""
    from jupyter_gpucost.core.catalog import load_catalog
    from jupyter_gpucost.server.service import CostConfig, CostService

    service = CostService(
        CostConfig(telemetry="simulated", catalog=load_catalog(), sample_interval_s=interval_s)
    )
    try:
        if service.source.name != "simulated":
            raise BenchError(f"the in-process sampler has no simulated source: {service.source}")
        wall0 = time.perf_counter()
        for _ in range(samples):
            service.sampler.sample_once()
            time.sleep(interval_s)
        wall = time.perf_counter() - wall0
        stats = service.sampler.stats()
    finally:
        service.stop()
    mean_s = stats.cpu_s_total / stats.samples if stats.samples else float("nan")
    return {
        "samples": stats.samples,
        "failed_reads": stats.failed_reads,
        "paced_every_s": interval_s,
        "wall_s": round(wall, 2),
        "gpus": len(service.sampler.latest.snapshot.gpus),
        "cpu_us_mean": mean_s * 1e6,
        "cpu_us_max": stats.cpu_s_max * 1e6,
        "server_interval_s": SERVER_INTERVAL_S,
        # the share of one core the sampler takes at the server's interval
        "core_share_mean": mean_s / SERVER_INTERVAL_S,
        "core_share_max": stats.cpu_s_max / SERVER_INTERVAL_S,
    }


# -- report ----------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    lat = results["latency_ms"]
    ours, theirs, probe = lat[OURS], lat[THEIRS], lat[PROBE]
    ratio = results["ratios"]
    s = results["sampler"]
    rows = [
        "| Figure | Value |",
        "| --- | --- |",
        f"| p50 ours / theirs | **{ratio['p50']:.3f}** |",
        f"| p99 ours / theirs (target ≤ {TARGET_P99_RATIO:g}) | **{ratio['p99']:.3f}** "
        f"({'met' if ratio['p99_target_met'] else 'NOT met'}) |",
        f"| Sampler CPU per sample / {s['server_interval_s']:g} s interval, mean | "
        f"**{s['core_share_mean']:.2e}** ({s['core_share_mean'] * 100:.4f} % of one core) |",
        f"| Sampler CPU per sample / {s['server_interval_s']:g} s interval, max | "
        f"**{s['core_share_max']:.2e}** ({s['core_share_max'] * 100:.4f} % of one core) |",
        f"| p50, p99 ours / `/api` probe | {ratio['p50_vs_probe']:.2f}, "
        f"{ratio['p99_vs_probe']:.2f} |",
        f"| `/api` probe max / its p50 | **{results['stall']['max_over_p50']:.1f}** "
        f"({results['stall']['probe_over_10x_p50']} of {probe['n']} requests over 10x p50) |",
        "",
        "| Route (ms) | p50 | p90 | p99 | max | mean |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for route, v in ((OURS, ours), (THEIRS, theirs), (PROBE, probe)):
        rows.append(
            f"| {LABELS[route]} | {v['p50_ms']:.2f} | {v['p90_ms']:.2f} | {v['p99_ms']:.2f} "
            f"| {v['max_ms']:.2f} | {v['mean_ms']:.2f} |"
        )
    rows += [
        "",
        f"Sampler (in-process, simulated {s['gpus']} GPUs, {s['samples']} samples): "
        f"CPU {s['cpu_us_mean']:.0f} µs mean, {s['cpu_us_max']:.0f} µs max per sample.",
        f"Load: {results['config']['kernels']} busy kernels, machine CPU "
        f"{results['load']['cpu_busy_pct']:.0f} % busy while timing; "
        f"{results['config']['requests']} requests per route after "
        f"{results['config']['warmup']} warm-up rounds.",
    ]
    return "\n".join(rows)


@contextlib.contextmanager
def running_server(tmp: Path, extra_args: list[str]) -> Iterator[Server]:
    server = Server(tmp, extra_args)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def run(args: argparse.Namespace) -> dict[str, Any]:
    import psutil

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpucost-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with running_server(tmp, args.server_arg) as server:
            check_routes(server)
            kernel_ids: list[str] = []
            try:
                kernel_ids = start_kernels(server, args.kernels)
                asyncio.run(make_all_busy(server, kernel_ids))
                time.sleep(args.settle)  # let the loops and the scheduler settle
                psutil.cpu_percent(interval=None)
                t0 = time.perf_counter()
                times = time_routes(server, args.requests, args.warmup)
                timing_s = time.perf_counter() - t0
                cpu_busy = psutil.cpu_percent(interval=None)
                sampler = sampler_cost(args.samples, args.sample_every)
            finally:
                problems = stop_kernels(server, kernel_ids)
        if problems:
            print("warning: " + "; ".join(problems), file=sys.stderr)

    lat = {r: asdict(latency(t)) for r, t in times.items()}
    ours, theirs, probe = lat[OURS], lat[THEIRS], lat[PROBE]
    p99_ratio = ours["p99_ms"] / theirs["p99_ms"]
    return {
        "benchmark": "bench_status",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["benchmarks/bench_status.py", *sys.argv[1:]]),
        "machine": machine(),
        "config": {
            "requests": args.requests,
            "warmup": args.warmup,
            "kernels": args.kernels,
            "server_sample_interval_s": SERVER_INTERVAL_S,
            "telemetry": "simulated",
            "extra_server_args": args.server_arg,
        },
        "latency_ms": lat,
        "ratios": {
            "p50": ours["p50_ms"] / theirs["p50_ms"],
            "p99": p99_ratio,
            "p99_target": TARGET_P99_RATIO,
            "p99_target_met": p99_ratio <= TARGET_P99_RATIO,
            # ours against the server's trivial route: what the route adds to the floor
            "p50_vs_probe": ours["p50_ms"] / probe["p50_ms"],
            "p99_vs_probe": ours["p99_ms"] / probe["p99_ms"],
        },
        "stall": {
            "probe_p50_ms": probe["p50_ms"],
            "probe_max_ms": probe["max_ms"],
            "max_over_p50": probe["max_ms"] / probe["p50_ms"],
            # requests to the trivial route that took over 10x its median
            "probe_over_10x_p50": sum(t * 1000 > 10 * probe["p50_ms"] for t in times[PROBE]),
        },
        "sampler": sampler,
        "load": {"cpu_busy_pct": cpu_busy, "timing_s": round(timing_s, 2)},
        "run_s": round(time.perf_counter() - started, 1),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=500, help="timed requests per route")
    p.add_argument("--warmup", type=int, default=30, help="untimed rounds first")
    p.add_argument("--kernels", type=int, default=4, help="busy kernels loading the CPUs")
    p.add_argument("--samples", type=int, default=500, help="in-process sampler samples")
    p.add_argument(
        "--sample-every", type=float, default=0.01, help="seconds between in-process samples"
    )
    p.add_argument("--settle", type=float, default=2.0, help="seconds before timing")
    p.add_argument("--out", type=Path, help="write the results as JSON to this file")
    p.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more jupyter server argument, e.g. "
        "--server-arg=--ResourceUseDisplay.enable_prometheus_metrics=False (repeatable)",
    )
    args = p.parse_args(argv)
    if args.warmup < 0:
        p.error("--warmup must be at least 0")
    if args.requests < 100:
        p.error("--requests must be at least 100 (for a p99)")
    if not 0 <= args.kernels <= 16:
        p.error("--kernels must be from 0 to 16")
    if args.samples < 1:
        p.error("--samples must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # benchmark this checkout, also when the package is not installed
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    try:
        results = run(args)
    except BenchError as e:
        print(f"bench_status: {e}", file=sys.stderr)
        return 1
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    print(f"\n({results['run_s']} s; command: {results['command']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
