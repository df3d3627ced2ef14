"""Benchmark: exporting a checkpoint, against boto3's upload_file and against cp.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_export.py [--size-mib 2048] [--repeats 3]
        [--only s3|local] [--out benchmarks/results/export.json]

One file of ``--size-mib`` MiB of ``os.urandom`` bytes is written to a temporary folder
and read once before any timing, so that every contender reads it from the page cache.

- **S3**: a moto S3 server runs in its own process on 127.0.0.1 (its spilled objects in
  the temporary folder). Each round, in alternating order, a fresh Python process
  uploads the file either through jupyter-gpucost's ``ExportManager`` with one S3 target
  (default ``Tuning``: 32 MiB parts, 4 in flight; the job also checks the key is free,
  checks the size that landed and writes the manifest), or with boto3's
  ``client.upload_file`` and its default ``TransferConfig``. Each process reports its
  wall time, its RSS just before the upload (after imports and set-up) and its peak RSS
  (sampled every 50 ms and ``ru_maxrss``). The objects are deleted after each run and the
  server's RSS is checked to stay bounded.
- **Local**: ``ExportManager`` with the local target (which fsyncs the copy before it
  renames it into place) against ``cp SRC DST`` and against ``cp`` followed by an fsync
  of the copy. Everything written is synced to disk (untimed) before each run.

Everything is removed at the end, and the server stopped, also on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
MIB = 1024 * 1024
BUCKET = "bench"
REGION = "us-east-1"
FILE_NAME = "model.ckpt"
#: the target for the memory a 2 GB export may add to the server
RSS_TARGET_MB = 256
RATIO_TARGET = 0.9
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
}


# -- the measured process ----------------------------------------------------------------


class RssSampler:
    """The process's RSS every ``every_s`` seconds, in a thread; keeps the peak."""

    def __init__(self, every_s: float = 0.05) -> None:
        self.proc = psutil.Process()
        self.every_s = every_s
        self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def _manager(targets: dict[str, Any], default: str, root: str, tuning: Any) -> Any:
    from jupyter_gpucost.server.export.jobs import ExportManager, ExportSettings

    return ExportManager(
        ExportSettings(targets=targets, default_target=default, root_dir=root, tuning=tuning)
    )


def _run_job(manager: Any, timeout_s: float) -> dict[str, Any]:
    """Start the export of FILE_NAME and wait for it (polled every 5 ms)."""
    job = manager.start([FILE_NAME])
    deadline = time.monotonic() + timeout_s
    while job.state not in ("done", "failed", "cancelled"):
        if time.monotonic() > deadline:
            job.cancel.set()
            raise SystemExit(f"the export did not end within {timeout_s} s")
        time.sleep(0.005)
    public = job.public()
    if public["state"] != "done":
        raise SystemExit(f"the export {public['state']}: {public['error']}")
    return public


def worker(args: argparse.Namespace) -> int:
    """One measured run, in its own process; prints one JSON line."""
    import boto3

    from jupyter_gpucost.server.export.stores import Tuning
    from jupyter_gpucost.server.export.targets import parse_targets

    root = Path(args.root)
    src = root / FILE_NAME
    tuning = Tuning()  # the defaults, unless a diagnostic run asks for others
    if args.part_mib:
        tuning = replace(tuning, part_size_bytes=args.part_mib * MIB)
    if args.concurrency:
        tuning = replace(tuning, concurrency=args.concurrency)
    size = src.stat().st_size
    run: Callable[[], dict[str, Any]]
    if args.worker == "s3-ours":
        targets = parse_targets(
            {
                "s3": {
                    "url": f"s3://{BUCKET}/{args.key}",
                    "options": {"endpoint_url": args.endpoint, "region_name": REGION},
                }
            },
            local_default=root,
        )
        manager = _manager(targets, "s3", str(root), tuning)
        # the same client set-up the store does, once, so botocore's S3 model is loaded
        boto3.session.Session().client("s3", endpoint_url=args.endpoint, region_name=REGION)

        def run() -> dict[str, Any]:
            public = _run_job(manager, args.timeout)
            return {"sha256": public["results"][0]["sha256"], "url": public["results"][0]["url"]}

    elif args.worker == "s3-boto3":
        client = boto3.client("s3", endpoint_url=args.endpoint, region_name=REGION)

        def run() -> dict[str, Any]:
            client.upload_file(str(src), BUCKET, f"{args.key}/{FILE_NAME}")
            head = client.head_object(Bucket=BUCKET, Key=f"{args.key}/{FILE_NAME}")
            return {"landed_bytes": head["ContentLength"]}

    elif args.worker == "local-ours":
        manager = _manager(
            parse_targets({}, local_default=Path(args.dest)), "local", str(root), tuning
        )

        def run() -> dict[str, Any]:
            public = _run_job(manager, args.timeout)
            name = public["results"][0]["url"].rsplit("/", 1)[-1]
            return {"sha256": public["results"][0]["sha256"], "file": name}

    else:
        raise SystemExit(f"unknown worker {args.worker}")

    with RssSampler() as rss:
        before = rss.peak
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        extra = run()
        elapsed = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    maxrss = cpu1.ru_maxrss * 1024
    peak = max(rss.peak, maxrss)
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "bytes": size,
                "mib_per_s": size / MIB / elapsed,
                "rss_before_mb": before / 1e6,
                "rss_peak_sampled_mb": rss.peak / 1e6,
                "ru_maxrss_mb": maxrss / 1e6,
                "rss_growth_mb": (peak - before) / 1e6,
                "cpu_s": cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime,
                **extra,
            }
        )
    )
    return 0


# -- the driver ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def write_random(path: Path, size_mib: int) -> str:
    """``size_mib`` MiB of os.urandom bytes (1 MiB at a time); returns their sha256."""
    sha = hashlib.sha256()
    with open(path, "wb") as f:
        for _ in range(size_mib):
            block = os.urandom(MIB)
            sha.update(block)
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    return sha.hexdigest()


def read_through(path: Path) -> float:
    """Read the file once (it stays in the page cache); returns the seconds it took."""
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(8 * MIB):
            pass
    return time.perf_counter() - t0


def sha256_rate(path: Path) -> float:
    """MiB/s of hashlib.sha256 over the file from the page cache, in one thread (the
    ceiling of any export that hashes what it copies, as ours does)."""
    sha = hashlib.sha256()
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while block := f.read(256 * 1024):
            sha.update(block)
    return path.stat().st_size / MIB / (time.perf_counter() - t0)


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class PeakWatcher:
    """Another process's RSS every 0.2 s, in a thread; keeps the peak."""

    def __init__(self, proc: psutil.Process) -> None:
        self.proc = proc
        self.peak = proc.memory_info().rss
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cpu(self) -> float:
        times = self.proc.cpu_times()
        return float(times.user + times.system)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> PeakWatcher:
        self.cpu_s = -self._cpu()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.cpu_s += self._cpu()


@contextlib.contextmanager
def moto_server(tmp: Path, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    spill = tmp / "moto-tmp"
    spill.mkdir()
    env = {**os.environ, **AWS_ENV, "TMPDIR": str(spill)}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    endpoint = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection((HOST, port), 0.5):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("moto did not start:\n" + log.read_text()[-2000:])
            time.sleep(0.1)
        yield endpoint, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_worker(mode: str, args: argparse.Namespace, **extra: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        mode,
        "--timeout",
        str(args.timeout),
    ]
    if args.part_mib:
        cmd += ["--part-mib", str(args.part_mib)]
    if args.concurrency:
        cmd += ["--concurrency", str(args.concurrency)]
    for name, value in extra.items():
        cmd += [f"--{name}", value]
    env = {**os.environ, **AWS_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout + 60)
    if done.returncode != 0:
        raise SystemExit(f"{mode} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["mib_per_s"] for r in runs]
    out: dict[str, Any] = {
        "mib_per_s": [round(x, 1) for x in rates],
        "mib_per_s_median": round(statistics.median(rates), 1),
        "seconds_median": round(statistics.median(r["seconds"] for r in runs), 2),
    }
    if "rss_growth_mb" in runs[0]:
        out["rss_growth_mb"] = [round(r["rss_growth_mb"], 1) for r in runs]
        out["rss_growth_mb_max"] = round(max(r["rss_growth_mb"] for r in runs), 1)
        out["rss_before_mb_median"] = round(statistics.median(r["rss_before_mb"] for r in runs), 1)
    return out


def bench_s3(args: argparse.Namespace, tmp: Path, root: Path, digest: str) -> dict[str, Any]:
    import boto3

    with moto_server(tmp, tmp / "moto.log") as (endpoint, proc):
        server = psutil.Process(proc.pid)
        for name, value in AWS_ENV.items():
            os.environ.setdefault(name, value)
        client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION)
        client.create_bucket(Bucket=BUCKET)
        # warm the server's code paths once (untimed): one small multipart upload
        warm = tmp / "warm.bin"
        warm.write_bytes(os.urandom(40 * MIB))
        client.upload_file(str(warm), BUCKET, "warm/warm.bin")
        client.delete_object(Bucket=BUCKET, Key="warm/warm.bin")
        warm.unlink()
        server_rss_start = server.memory_info().rss
        runs: dict[str, list[dict[str, Any]]] = {"ours": [], "boto3": []}
        server_after: list[float] = []
        for i in range(args.repeats):
            order = ["ours", "boto3"] if i % 2 == 0 else ["boto3", "ours"]
            for who in order:
                key = f"r{i}-{who}"
                read_through(root / FILE_NAME)
                with PeakWatcher(server) as watch:
                    mode = "s3-ours" if who == "ours" else "s3-boto3"
                    result = run_worker(mode, args, root=str(root), endpoint=endpoint, key=key)
                result["server_rss_peak_mb"] = watch.peak / 1e6
                result["server_cpu_s"] = watch.cpu_s
                if who == "ours" and result["sha256"] != digest:
                    raise SystemExit(f"ours: the sha256 {result['sha256']} is not {digest}")
                if who == "boto3" and result["landed_bytes"] != (root / FILE_NAME).stat().st_size:
                    raise SystemExit(f"boto3: {result['landed_bytes']} bytes landed")
                listed = client.list_objects_v2(Bucket=BUCKET, Prefix=f"{key}/")
                keys = [o["Key"] for o in listed.get("Contents", [])]
                for k in keys:
                    client.delete_object(Bucket=BUCKET, Key=k)
                result["objects_written"] = keys
                pending = client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
                if pending:
                    raise SystemExit(f"multipart uploads left behind: {pending}")
                time.sleep(1)
                after = server.memory_info().rss
                server_after.append(after / 1e6)
                result["server_rss_after_delete_mb"] = after / 1e6
                result["server_spill_bytes_after_delete"] = dir_bytes(tmp / "moto-tmp")
                runs[who].append(result)
                print(
                    f"  s3 {who:5} round {i + 1}: {result['mib_per_s']:7.1f} MiB/s, "
                    f"CPU {result['cpu_s']:.1f} s, RSS +{result['rss_growth_mb']:.0f} MB; moto: "
                    f"CPU {watch.cpu_s:.1f} s, peak "
                    f"{result['server_rss_peak_mb']:.0f} MB, after delete {after / 1e6:.0f} MB",
                    flush=True,
                )
        ours, peer = summary(runs["ours"]), summary(runs["boto3"])
        return {
            "endpoint": "moto.server on 127.0.0.1 (its own process)",
            "ours": {**ours, "runs": runs["ours"]},
            "boto3": {**peer, "runs": runs["boto3"]},
            "ratio_ours_over_boto3": round(ours["mib_per_s_median"] / peer["mib_per_s_median"], 3),
            "server_rss_start_mb": round(server_rss_start / 1e6, 1),
            "server_rss_after_each_delete_mb": [round(x, 1) for x in server_after],
            "server_rss_peak_mb_max": round(
                max(r["server_rss_peak_mb"] for r in runs["ours"] + runs["boto3"]), 1
            ),
        }


def bench_local(args: argparse.Namespace, tmp: Path, root: Path, digest: str) -> dict[str, Any]:
    src = root / FILE_NAME
    size = src.stat().st_size
    # cp+sha256sum: the same work as ours done with the usual tools (a copy, and the
    # checksum a manifest needs), one after the other as a shell user would
    runs: dict[str, list[dict[str, Any]]] = {
        "ours": [],
        "cp": [],
        "cp+fsync": [],
        "cp+sha256sum": [],
    }
    kinds = list(runs)
    for i in range(args.repeats):
        order = kinds[i % len(kinds) :] + kinds[: i % len(kinds)]
        for who in order:
            dest = tmp / f"local-{i}-{who.replace('+', '-')}"
            dest.mkdir()
            os.sync()
            read_through(src)
            if who == "ours":
                result = run_worker("local-ours", args, root=str(root), dest=str(dest))
                if result["sha256"] != digest:
                    raise SystemExit(f"ours: the sha256 {result['sha256']} is not {digest}")
            else:
                copy = dest / FILE_NAME
                t0 = time.perf_counter()
                subprocess.run(["cp", str(src), str(copy)], check=True)
                if who in ("cp+fsync", "cp+sha256sum"):
                    fd = os.open(copy, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                if who == "cp+sha256sum":
                    line = subprocess.run(
                        ["sha256sum", str(copy)], check=True, capture_output=True, text=True
                    ).stdout
                    if line.split()[0] != digest:
                        raise SystemExit("sha256sum: the copy's checksum is wrong")
                elapsed = time.perf_counter() - t0
                result = {"seconds": elapsed, "bytes": size, "mib_per_s": size / MIB / elapsed}
            if (dest / FILE_NAME).stat().st_size != size:
                raise SystemExit(f"{who}: the copy has the wrong size")
            shutil.rmtree(dest)
            runs[who].append(result)
            print(f"  local {who:12} round {i + 1}: {result['mib_per_s']:7.1f} MiB/s", flush=True)
    out = {who: {**summary(r), "runs": r} for who, r in runs.items()}
    ours = out["ours"]["mib_per_s_median"]
    return {
        **out,
        "ratio_ours_over_cp": round(ours / out["cp"]["mib_per_s_median"], 3),
        "ratio_ours_over_cp_fsync": round(ours / out["cp+fsync"]["mib_per_s_median"], 3),
        "ratio_ours_over_cp_fsync_sha256sum": round(
            ours / out["cp+sha256sum"]["mib_per_s_median"], 3
        ),
    }


def machine(tmp: Path) -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions = {}
    for dist in ("boto3", "botocore", "s3transfer", "moto", "psutil"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    fs = next(
        (
            p.fstype
            for p in sorted(psutil.disk_partitions(all=True), key=lambda p: -len(p.mountpoint))
            if str(tmp).startswith(p.mountpoint)
        ),
        "",
    )
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "temp_fs": fs,
        "cp": subprocess.run(["cp", "--version"], capture_output=True, text=True).stdout.split(
            "\n"
        )[0],
        **versions,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("s3", "local"), default="")
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks/results/export.json"))
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--part-mib", type=int, default=0, help="ours: part size (diagnostics)")
    parser.add_argument("--concurrency", type=int, default=0, help="ours: parts in flight")
    # the measured process
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    parser.add_argument("--root", default="", help=argparse.SUPPRESS)
    parser.add_argument("--dest", default="", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", default="", help=argparse.SUPPRESS)
    parser.add_argument("--key", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    started = datetime.now(UTC)
    tmp = Path(tempfile.mkdtemp(prefix="bench-export-"))
    try:
        root = tmp / "root"
        root.mkdir()
        t0 = time.perf_counter()
        digest = write_random(root / FILE_NAME, args.size_mib)
        print(
            f"{args.size_mib} MiB of os.urandom bytes written in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        cached_s = read_through(root / FILE_NAME)
        print(f"read once from the page cache: {args.size_mib / cached_s:.0f} MiB/s", flush=True)
        hash_rate = sha256_rate(root / FILE_NAME)
        print(f"sha256 of it, one thread: {hash_rate:.0f} MiB/s", flush=True)
        result: dict[str, Any] = {
            "started": started.isoformat(timespec="seconds"),
            "size_mib": args.size_mib,
            "data": "os.urandom, 1 MiB at a time",
            "repeats": args.repeats,
            "source_in_page_cache": True,
            "page_cache_read_mib_per_s": round(args.size_mib / cached_s, 1),
            "sha256_mib_per_s": round(hash_rate, 1),
            "tuning": {
                "part_mib": args.part_mib or "default (32)",
                "concurrency": args.concurrency or "default (4)",
            },
            "machine": machine(tmp),
        }
        if args.only in ("", "s3"):
            print("S3 (moto on 127.0.0.1):", flush=True)
            result["s3"] = bench_s3(args, tmp, root, digest)
        if args.only in ("", "local"):
            print("local folder:", flush=True)
            result["local"] = bench_local(args, tmp, root, digest)
        result["seconds"] = round((datetime.now(UTC) - started).total_seconds(), 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(result)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def report(result: dict[str, Any]) -> None:
    def met(ok: bool) -> str:
        return "met" if ok else "**not met**"

    rows = []
    if "s3" in result:
        s3 = result["s3"]
        ratio = s3["ratio_ours_over_boto3"]
        growth = s3["ours"]["rss_growth_mb_max"]
        rows += [
            f"| S3 throughput, ours / boto3 upload_file (medians) | **{ratio}** "
            f"| ≥ {RATIO_TARGET}: {met(ratio >= RATIO_TARGET)} |",
            f"| S3 peak RSS growth, ours (max over runs) | **{growth} MB** "
            f"| ≤ {RSS_TARGET_MB} MB: {met(growth <= RSS_TARGET_MB)} |",
            f"| S3 peak RSS growth, boto3 (max over runs) | {s3['boto3']['rss_growth_mb_max']} MB "
            "| |",
        ]
    if "local" in result:
        local = result["local"]
        ratio = local["ratio_ours_over_cp"]
        rows += [
            f"| local throughput, ours / cp (medians) | **{ratio}** "
            f"| ≥ {RATIO_TARGET}: {met(ratio >= RATIO_TARGET)} |",
            f"| local throughput, ours / (cp + fsync) (medians) | "
            f"**{local['ratio_ours_over_cp_fsync']}** | |",
            f"| local throughput, ours / (cp + fsync + sha256sum) (medians) | "
            f"**{local['ratio_ours_over_cp_fsync_sha256sum']}** | |",
        ]
    print("\n| Figure | Value | Target |\n| --- | ---: | --- |")
    print("\n".join(rows))
    print("\n| Run (MiB/s) | median | runs |\n| --- | ---: | --- |")
    for where in ("s3", "local"):
        for who, data in result.get(where, {}).items():
            if isinstance(data, dict) and "mib_per_s" in data:
                runs = ", ".join(f"{x:.1f}" for x in data["mib_per_s"])
                print(f"| {where} {who} | {data['mib_per_s_median']:.1f} | {runs} |")


if __name__ == "__main__":
    raise SystemExit(main())
