"""Run the real NVML path on a machine with an NVIDIA GPU and report what it saw.

    python benchmarks/gpu_nvml_live.py --out-dir OUT [--phase-s 15]

Needs nvidia-ml-py and torch with CUDA. It

1. opens :class:`NvmlSource` and prints the status detail and one full reading;
2. times 200 ``read()`` calls (the sampler's cost per sample) against the bare
   ``nvmlDeviceGetUtilizationRates`` call, as a ratio;
3. runs a workload in phases (idle, bf16 matmul flat out, idle holding memory, matmul at
   about half duty, idle) while the real sampler + meter price it from the shipped catalog
   and a recorder writes a trace (``OUT/h100-live.jsonl.gz``) the simulated source replays;
4. checks that this process's pid is the one NVML lists on the GPU (attribution needs it),
   and compares the energy counter with integrated power.

Everything is printed as JSON lines and written to ``OUT/nvml-live.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import threading
import time
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import Any

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.meter import Meter
from jupyter_gpucost.server.sampler import Sampler, monotonic_us, utc_now
from jupyter_gpucost.server.status import status_payload
from jupyter_gpucost.telemetry.base import GpuReading
from jupyter_gpucost.telemetry.nvml import NvmlSource
from jupyter_gpucost.telemetry.trace import TraceDevice, write_trace


def emit(report: dict[str, Any], key: str, value: Any) -> None:
    report[key] = value
    print(json.dumps({key: value}, default=str), flush=True)


def time_reads(source: NvmlSource, n: int = 200) -> dict[str, float]:
    import pynvml

    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    ours, bare = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        source.read()
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        pynvml.nvmlDeviceGetUtilizationRates(handle)
        bare.append(time.perf_counter() - t0)
    med_ours, med_bare = statistics.median(ours), statistics.median(bare)
    return {
        "read_median_ms": med_ours * 1e3,
        "read_p99_ms": sorted(ours)[int(0.99 * n) - 1] * 1e3,
        "utilization_call_median_ms": med_bare * 1e3,
        "read_over_one_call": med_ours / med_bare,
    }


def workload(phase_s: float, marks: list[tuple[str, float]]) -> None:
    import torch

    dev = torch.device("cuda")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

    def busy(seconds: float, duty: float) -> int:
        n = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            for _ in range(20):
                a @ b
            torch.cuda.synchronize()
            n += 20
            spent = time.monotonic() - t0
            if duty < 1:
                time.sleep(spent * (1 - duty) / duty)
        return n

    marks.append(("idle", time.monotonic()))
    time.sleep(phase_s)
    marks.append(("matmul 100%", time.monotonic()))
    busy(phase_s, 1.0)
    marks.append(("idle holding 20 GiB", time.monotonic()))
    hold = torch.empty(20 * 2**30, dtype=torch.uint8, device=dev)
    time.sleep(phase_s)
    del hold
    torch.cuda.empty_cache()
    marks.append(("matmul ~50% duty", time.monotonic()))
    busy(phase_s, 0.5)
    marks.append(("idle", time.monotonic()))
    time.sleep(phase_s)
    marks.append(("end", time.monotonic()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--phase-s", type=float, default=15.0)
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}

    import torch

    torch.cuda.init()  # hold a context, so this process is on the GPU's process list
    torch.zeros(1, device="cuda")

    source = NvmlSource()
    source.open()
    emit(report, "status", asdict(source.status()))
    first = source.read()
    emit(report, "first_reading", [asdict(r) for r in first])
    emit(report, "read_timing", time_reads(source))
    pids = {p.pid for r in source.read() for p in (r.processes or ())}
    emit(report, "pid_visible", {"own_pid": os.getpid(), "nvml_pids": sorted(pids)})

    catalog = load_catalog()
    policy = PricePolicy(catalog=catalog, provider="aws", market="on-demand", instance="")
    meter = Meter(
        policy=policy,
        rule=BillingRule(1, 60),
        sample_interval_s=1.0,
        start_us=monotonic_us(),
        started=utc_now(),
        base_per_hour=Decimal(0),
    )
    sampler_source = NvmlSource()
    sampler_source.open()
    sampler = Sampler(sampler_source, meter, interval_s=1.0)
    sampler.sample_once()
    sampler.start()

    stop = threading.Event()
    frames: list[tuple[float, tuple[GpuReading, ...]]] = []

    def record() -> None:
        t0 = time.monotonic()
        next_at = t0
        while not stop.is_set():
            frames.append((time.monotonic() - t0, source.read()))
            next_at += 1.0
            stop.wait(max(next_at - time.monotonic(), 0))

    recorder = threading.Thread(target=record)
    recorder.start()
    marks: list[tuple[str, float]] = []
    workload(args.phase_s, marks)
    stop.set()
    recorder.join()
    sampler.stop()

    published = sampler.latest
    payload = status_payload(
        published.snapshot,
        published.telemetry,
        policy=policy,
        rule=BillingRule(1, 60),
        currency="USD",
        currency_symbol="$",
    )
    emit(report, "status_payload", payload)

    # per phase: mean utilisation, memory, power as the recorder saw them
    t_start = marks[0][1]
    phases = []
    for (name, start), (_, end) in itertools.pairwise(marks):
        rows = [r[0] for t, r in frames if start - t_start <= t < end - t_start and r]
        if not rows:
            continue
        phases.append(
            {
                "phase": name,
                "seconds": round(end - start, 1),
                "utilization_pct_mean": statistics.mean(r.utilization_pct or 0 for r in rows),
                "memory_used_gib_max": max((r.memory_used_bytes or 0) for r in rows) / 2**30,
                "power_w_mean": statistics.mean(r.power_w or 0 for r in rows),
            }
        )
    emit(report, "phases", phases)

    energy = [(t, r[0].energy_j, r[0].power_w) for t, r in frames if r]
    if len(energy) > 2 and energy[0][1] is not None:
        counter_j = energy[-1][1] - energy[0][1]
        integrated_j = sum(
            (t1 - t0) * (p1 or 0) for (t0, _, _), (t1, _, p1) in itertools.pairwise(energy)
        )
        emit(
            report,
            "energy",
            {
                "counter_j": counter_j,
                "integrated_power_j": integrated_j,
                "integrated_over_counter": integrated_j / counter_j if counter_j else None,
            },
        )

    devices = [TraceDevice(r.index, r.uuid, r.name, r.memory_total_bytes) for r in first]
    count = write_trace(
        out / "h100-live.jsonl.gz",
        name=f"{first[0].name} live (benchmarks/gpu_nvml_live.py)",
        interval_s=1.0,
        synthetic=False,
        devices=devices,
        frames=iter(frames),
    )
    emit(report, "trace_frames", count)
    source.close()
    (out / "nvml-live.json").write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
