"""Generate the shipped demo trace: a 30-minute notebook session on 2x A100-SXM4-80GB.

The trace is synthetic (no GPU was recorded) and says so in its header; its shape follows
what a notebook training session looks like, with the idle stretches that make up much of a
GPU bill:

====================  =========  ===========================================
phase                 seconds    GPUs
====================  =========  ===========================================
loading data          0-90       both idle, memory filling on GPU 0
DDP training          90-720     both 92-100 %, ~61 GB each, 330-400 W
reading the results   720-960    both idle, DDP workers still hold memory
evaluation            960-1260   GPU 0 at 55-75 %, GPU 1 idle and empty
lunch break           1260-1800  both idle
====================  =========  ===========================================

Run ``python -m jupyter_gpucost.telemetry.demo_trace OUT.jsonl.gz`` to regenerate it; the
output is the same for the same seed.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator

from .base import GpuReading, ProcessReading
from .trace import TraceDevice, write_trace

GB = 1000**3
A100_80GB_BYTES = 85_899_345_920
DEVICES = (
    TraceDevice(
        0, "GPU-6f1a9c3e-52b4-4e0f-9d3a-1c7e8b2a4f01", "NVIDIA A100-SXM4-80GB", A100_80GB_BYTES
    ),
    TraceDevice(
        1, "GPU-b83d27f4-0a6c-4d1e-8f5b-92e4c6a1d7e2", "NVIDIA A100-SXM4-80GB", A100_80GB_BYTES
    ),
)
KERNEL_PID = 4242
WORKER_PIDS = (4301, 4302)
DURATION_S = 1800
NAME = "2x A100-80GB notebook training session (synthetic)"


def _phase(t: int) -> str:
    if t < 90:
        return "loading"
    if t < 720:
        return "training"
    if t < 960:
        return "reading"
    if t < 1260:
        return "evaluation"
    return "break"


def _device_state(
    phase: str, index: int, t: int, rng: random.Random
) -> tuple[float, float, int, tuple[int, ...]]:
    """(utilisation %, power W, memory used bytes, pids) of one GPU at second ``t``."""
    kernel_or_worker = (KERNEL_PID,) if index == 0 else (WORKER_PIDS[1],)
    if phase == "loading":
        util = rng.choice((0.0, 0.0, 0.0, 1.0, 3.0)) if index == 0 else 0.0
        memory = int(0.5 * GB + t / 90 * 2.5 * GB) if index == 0 else 0
        return util, rng.uniform(58, 64), memory, (KERNEL_PID,) if index == 0 else ()
    if phase == "training":
        pids = (KERNEL_PID, WORKER_PIDS[0]) if index == 0 else kernel_or_worker
        memory = 61 * GB + rng.randrange(0, 400_000_000)
        return rng.uniform(92, 100), rng.uniform(330, 400), memory, pids
    if phase == "reading":  # the DDP workers still hold their memory
        pids = (KERNEL_PID, WORKER_PIDS[0]) if index == 0 else kernel_or_worker
        return 0.0, rng.uniform(80, 90), 61 * GB, pids
    if phase == "evaluation" and index == 0:
        memory = 34 * GB + rng.randrange(0, 200_000_000)
        return rng.uniform(55, 75), rng.uniform(200, 240), memory, (KERNEL_PID,)
    # workers have exited; the kernel keeps its cached memory on GPU 0
    if index == 0:
        return 0.0, rng.uniform(58, 64), 34 * GB, (KERNEL_PID,)
    return 0.0, rng.uniform(52, 56), 0, ()


def frames(seed: int = 20261122) -> Iterator[tuple[float, tuple[GpuReading, ...]]]:
    rng = random.Random(seed)
    energy_j = [5_000_000.0, 4_870_000.0]
    for t in range(DURATION_S):
        phase = _phase(t)
        readings = []
        for d in DEVICES:
            util, power, memory, pids = _device_state(phase, d.index, t, rng)
            energy_j[d.index] += power
            readings.append(
                GpuReading(
                    index=d.index,
                    uuid=d.uuid,
                    name=d.name,
                    nvml_index=d.index,
                    memory_total_bytes=d.memory_total_bytes,
                    memory_used_bytes=memory,
                    utilization_pct=float(round(util)),
                    power_w=round(power, 1),
                    energy_j=round(energy_j[d.index], 1),
                    processes=tuple(ProcessReading(pid, memory // len(pids)) for pid in pids),
                )
            )
        yield float(t), tuple(readings)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m jupyter_gpucost.telemetry.demo_trace OUT.jsonl.gz", file=sys.stderr)
        return 2
    n = write_trace(
        args[0], name=NAME, interval_s=1.0, synthetic=True, devices=DEVICES, frames=frames()
    )
    print(f"wrote {n} frames to {args[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
