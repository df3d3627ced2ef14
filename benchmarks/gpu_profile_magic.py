"""Where a ``%%gpucost`` cell's time goes on a GPU: each step apart, to trace a missed target.

    python benchmarks/gpu_profile_magic.py --out FILE [--repeat 9]

1. ``light``: the 157 ms cell (100 bf16 8192² matmuls) and an empty cell plain, under
   ``%%time``, under ``%%gpucost`` and under ``%%gpucost`` with the energy reader stopped
   (no NVML read beside the cell), alternating, medians: what the reader costs a cell.
2. ``profile_light``: ``cProfile`` of 300 empty ``%%gpucost`` cells and of 30 matmul cells:
   the functions that cost the most, own time and with what they call.
3. ``tiny``: the cell of 2,000 one-element adds under ``torch.profiler``, phase by phase:
   the profiler's start, the cell, its stop, reading the raw events and building the table
   (:func:`jupyter_gpucost.kernel.cell.ops.ops_table`), with CPU and CUDA activities (what
   ``--ops`` records) and with CUDA alone (the least a profiler can record), against the
   plain cell.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_magic import stand_in_server

BODY = "for _ in range(100):\n    c = a @ b\ntorch.cuda.synchronize()"
SETUP = (
    "import torch\n"
    "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
    "b = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
    "c = a @ b; torch.cuda.synchronize()"
)


def cpu_only() -> None:
    """No GPU here: the same steps on small CPU tensors (to check the script itself)."""
    global BODY, SETUP
    BODY = "for _ in range(20):\n    c = a @ b"
    SETUP = "import torch\na = torch.randn(256, 256)\nb = torch.randn(256, 256)"


def shell_with_extension() -> tuple[Any, Any, Any]:
    from IPython.core.interactiveshell import InteractiveShell

    server, _ = stand_in_server()
    os.environ["JUPYTER_GPUCOST_URL"] = f"http://127.0.0.1:{server.server_address[1]}/"
    os.environ["JUPYTER_GPUCOST_TOKEN"] = "bench"
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_gpucost")
    shell.display_pub.publish = lambda *a, **k: None
    assert shell.run_cell(SETUP).success

    from jupyter_gpucost.kernel.link import link

    server_link = link()
    assert server_link is not None

    def run(source: str) -> float:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            shell.run_cell(source)
        elapsed = time.perf_counter() - t0
        server_link.flush()
        return elapsed

    return shell, run, server_link


def light(run: Any, repeat: int) -> dict[str, Any]:
    from jupyter_gpucost.kernel.cell import measure
    from jupyter_gpucost.kernel.cell.energy import EnergyReader

    real = measure.energy_reader
    off = EnergyReader(lambda: {})
    off._gone = True  # a reader that never reads: no NVML call beside the cell

    def reader_off(source: str) -> float:
        measure.stop_energy_reader()
        measure.energy_reader = lambda: off
        try:
            return run(source)
        finally:
            measure.energy_reader = real

    variants = {
        "plain": lambda body: run(body),
        "time": lambda body: run("%%time\n" + body),
        "gpucost": lambda body: run("%%gpucost\n" + body),
        "gpucost_reader_off": lambda body: reader_off("%%gpucost\n" + body),
    }
    out: dict[str, Any] = {}
    for label, body, n in (("matmul_cell", BODY, repeat), ("empty_cell", "pass", 200)):
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(2):
            for fn in variants.values():
                fn(body)
        for _ in range(n):
            for name, fn in variants.items():
                times[name].append(fn(body))
        medians = {k: statistics.median(v) for k, v in times.items()}
        out[label] = {
            "median_ms": {k: v * 1e3 for k, v in medians.items()},
            "ratio_to_plain": {k: v / medians["plain"] for k, v in medians.items()},
            "extra_ms": {k: (v - medians["plain"]) * 1e3 for k, v in medians.items()},
        }
    return out


def profiled(run: Any, source: str, n: int) -> dict[str, str]:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(n):
        run(source)
    profile.disable()
    out = {}
    for key in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats(key).print_stats(30)
        out[key] = text.getvalue()
    return out


def tiny(repeat: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from jupyter_gpucost.kernel.cell.ops import ops_table

    cuda = torch.cuda.is_available()
    x = torch.ones(1, device="cuda" if cuda else "cpu")

    def body() -> None:
        for _ in range(2000):
            x.add_(1)
        if cuda:
            torch.cuda.synchronize()

    body()
    gpu = [ProfilerActivity.CUDA] if cuda else []
    with profile(activities=[ProfilerActivity.CPU, *gpu]):
        body()  # the profiler's first start in the process (seconds), not timed
    out: dict[str, Any] = {}
    plain = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        body()
        plain.append(time.perf_counter() - t0)
    out["plain_ms"] = statistics.median(plain) * 1e3
    for label, activities in (
        ("cpu_and_cuda", [ProfilerActivity.CPU, *gpu]),
        ("cuda_only", gpu),
    ):
        if not activities:
            continue
        phases: dict[str, list[float]] = {
            k: [] for k in ("start", "cell", "stop", "events", "table", "total")
        }
        count = kernels = 0
        rows: list[Any] = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            p = profile(activities=activities)
            p.__enter__()
            t1 = time.perf_counter()
            body()
            t2 = time.perf_counter()
            p.__exit__(None, None, None)
            t3 = time.perf_counter()
            events = p.profiler.kineto_results.events()
            t4 = time.perf_counter()
            table = ops_table(events, cuda=cuda, top=5)
            t5 = time.perf_counter()
            for k, a, b in (
                ("start", t0, t1),
                ("cell", t1, t2),
                ("stop", t2, t3),
                ("events", t3, t4),
                ("table", t4, t5),
                ("total", t0, t5),
            ):
                phases[k].append((b - a) * 1e3)
            count, kernels, rows = len(events), table.kernels, table.rows
        medians = {k: statistics.median(v) for k, v in phases.items()}
        out[label] = {
            "median_ms": medians,
            "ratio_to_plain": medians["total"] / out["plain_ms"],
            "events": count,
            "kernels": kernels,
            "rows": [(r.name, r.calls, r.self_time_us) for r in rows],
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    out: dict[str, Any] = {}
    import torch

    if not torch.cuda.is_available():
        cpu_only()
    try:
        out["tiny"] = tiny(args.repeat)
        print(json.dumps(out["tiny"], indent=1))
        _shell, run, _ = shell_with_extension()
        out["light"] = light(run, args.repeat)
        print(json.dumps(out["light"], indent=1))
        out["profile_light_empty"] = profiled(run, "%%gpucost\npass", 300)
        out["profile_light_matmul"] = profiled(run, "%%gpucost\n" + BODY, 30)
        print(out["profile_light_empty"]["tottime"][:6000])
        print(out["profile_light_matmul"]["cumulative"][:6000])
    finally:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
