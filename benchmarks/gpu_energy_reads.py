"""Does reading the GPU's energy beside a cell slow the GPU work in it, and what else would do?

    python benchmarks/gpu_energy_reads.py --out FILE [--repeat 15]

On a machine with an NVIDIA GPU:

1. ``slowdown``: the 157 ms cell (100 bf16 8192² matmuls, synchronised) timed alone and
   with one thread beside it reading, every P ms, NVML's energy counter
   (``nvmlDeviceGetTotalEnergyConsumption``), the power (``nvmlDeviceGetPowerUsage``) or
   the instant power field (``NVML_FI_DEV_POWER_INSTANT``), alternating, medians, as ratios
   to the cell alone; and what each read takes.
2. ``accuracy``: cells of 0.3, 1 and 3 s of matmuls and 1 s of sleep: the energy counter's
   delta from blocking reads just before and after each cell, against the integral of the
   power and of the instant power sampled every 50 ms over the same span.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import torch

pynvml.nvmlInit()
HANDLE = pynvml.nvmlDeviceGetHandleByIndex(0)
A = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
B = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)


def energy_j() -> float:
    return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(HANDLE)) / 1e3


def power_w() -> float:
    return float(pynvml.nvmlDeviceGetPowerUsage(HANDLE)) / 1e3


def instant_w() -> float:
    (value,) = pynvml.nvmlDeviceGetFieldValues(HANDLE, [pynvml.NVML_FI_DEV_POWER_INSTANT])
    if value.nvmlReturn != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(value.nvmlReturn)
    return float(value.value.uiVal) / 1e3


def cell(matmuls: int = 100) -> float:
    t0 = time.perf_counter()
    for _ in range(matmuls):
        A @ B
    torch.cuda.synchronize()
    return time.perf_counter() - t0


class Beside:
    """A thread calling ``read`` every ``period_s``, keeping (time, value) and read times."""

    def __init__(self, read: Callable[[], float], period_s: float) -> None:
        self.read, self.period_s = read, period_s
        self.samples: list[tuple[float, float]] = []
        self.read_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Beside:
        self._thread.start()
        time.sleep(self.period_s * 2)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()
            value = self.read()
            t1 = time.perf_counter()
            self.samples.append(((t0 + t1) / 2, value))
            self.read_ms.append((t1 - t0) * 1e3)
            self._stop.wait(max(self.period_s - (time.perf_counter() - t0), 0.0))


def slowdown(repeat: int) -> dict[str, Any]:
    readers: dict[str, tuple[Callable[[], float], float] | None] = {
        "alone": None,
        "energy_50ms": (energy_j, 0.05),
        "energy_130ms": (energy_j, 0.13),
        "energy_330ms": (energy_j, 0.33),
        "power_50ms": (power_w, 0.05),
        "instant_power_50ms": (instant_w, 0.05),
    }
    times: dict[str, list[float]] = {k: [] for k in readers}
    read_ms: dict[str, list[float]] = {k: [] for k in readers}
    errors: dict[str, str] = {}
    for _ in range(3):
        cell()
    for _ in range(repeat):
        for name, reader in readers.items():
            if name in errors:
                continue
            if reader is None:
                times[name].append(cell())
                continue
            try:
                reader[0]()
            except Exception as e:
                errors[name] = repr(e)
                continue
            with Beside(*reader) as beside:
                for _ in range(3):
                    times[name].append(cell())
            read_ms[name] += beside.read_ms
    alone = statistics.median(times["alone"])
    return {
        "cell_ms": {k: statistics.median(v) * 1e3 for k, v in times.items() if v},
        "ratio_to_alone": {k: statistics.median(v) / alone for k, v in times.items() if v},
        "read_ms_median": {k: statistics.median(v) for k, v in read_ms.items() if v},
        "read_ms_p90": {k: sorted(v)[int(0.9 * (len(v) - 1))] for k, v in read_ms.items() if v},
        "errors": errors,
    }


def integral_j(samples: list[tuple[float, float]], t0: float, t1: float) -> float:
    """Trapezoids of (time, watts) samples over [t0, t1], the ends interpolated."""

    def at(t: float) -> float:
        for (ta, wa), (tb, wb) in itertools.pairwise(samples):
            if ta <= t <= tb:
                return wa + (wb - wa) * (t - ta) / (tb - ta) if tb > ta else wb
        return samples[-1][1] if t > samples[-1][0] else samples[0][1]

    points = [(t0, at(t0)), *[s for s in samples if t0 < s[0] < t1], (t1, at(t1))]
    return sum((tb - ta) * (wa + wb) / 2 for (ta, wa), (tb, wb) in itertools.pairwise(points))


def accuracy() -> list[dict[str, Any]]:
    out = []
    per_matmul_s = cell(20) / 20
    for label, seconds, busy in (
        ("matmul_0.3s", 0.3, True),
        ("matmul_1s", 1.0, True),
        ("matmul_3s", 3.0, True),
        ("sleep_1s", 1.0, False),
    ):
        for _ in range(2):
            with Beside(power_w, 0.05) as power, Beside(instant_w, 0.05) as instant:
                time.sleep(0.3)
                e0 = energy_j()
                t0 = time.perf_counter()
                if busy:
                    cell(max(1, round(seconds / per_matmul_s)))
                else:
                    time.sleep(seconds)
                t1 = time.perf_counter()
                e1 = energy_j()
                time.sleep(0.3)
            counter = e1 - e0
            out.append(
                {
                    "cell": label,
                    "seconds": t1 - t0,
                    "counter_j": counter,
                    "power_integral_j": integral_j(power.samples, t0, t1),
                    "instant_integral_j": integral_j(instant.samples, t0, t1)
                    if instant.samples
                    else None,
                }
            )
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    out: dict[str, Any] = {
        "gpu": pynvml.nvmlDeviceGetName(HANDLE),
        "driver": pynvml.nvmlSystemGetDriverVersion(),
    }
    try:
        out["slowdown"] = slowdown(args.repeat)
        print(json.dumps(out["slowdown"], indent=1))
        try:
            out["accuracy"] = accuracy()
        except Exception as e:
            out["accuracy_error"] = repr(e)
        print(json.dumps(out.get("accuracy") or out.get("accuracy_error"), indent=1))
    finally:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
