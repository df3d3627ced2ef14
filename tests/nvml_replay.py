"""Stand-ins for ``pynvml`` that replay what a real H100 answered (``tests/data/h100/``).

Recorded on an NVIDIA H100 80GB HBM3, driver 580.159.04. What the hardware did, and these
stand-ins copy:

* ``nvmlDeviceGetProcessUtilization`` returns a sample for **one process only**, the one
  that dominated the sample; a process holding memory without computing shows at 0 % in
  some calls and not at all in others (here: at random, from a seed);
* the driver takes a sample about every 0.2 s and keeps each process's newest; a call
  with the previous call's timestamp gets only newer ones, and ``NOT_FOUND`` when there is none newer (polled every 0.1 s,
  half the calls) or when no process has a CUDA context;
* every process holding a context is always in the compute-process list with its memory.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml as _real
from nvml_stub import DRIVER_570, FakeHandle, FakeNvml, FakeProcess, h100_80gb

DATA = Path(__file__).parent / "data" / "h100"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text())
    return data


@dataclass(frozen=True)
class Sample:
    pid: int
    sm_pct: int
    stamp_us: int


class ReplayNvml(FakeNvml):
    """One H100 whose answers come from a recording, one step at a time.

    ``step(...)`` sets what the device reports until the next step: utilisation, power,
    energy, the compute processes and the per-process samples the driver took. The
    samples a call returns are those newer than the timestamp it passes, plus (at random)
    idle holders at 0 %, stamped with the newest sample's time.
    """

    def __init__(self, seed: int = 0) -> None:
        super().__init__([h100_80gb(processes=[], utilization=0)], DRIVER_570)
        self.rng = random.Random(seed)
        self.samples: list[Sample] = []

    @property
    def gpu(self) -> Any:
        return self.gpus[0]

    def step(
        self,
        *,
        util: int,
        power_mw: int,
        energy_mj: int,
        processes: list[tuple[int, int]],
        samples: list[Sample],
    ) -> None:
        gpu = self.gpu
        gpu.utilization = util
        gpu.power_mw = power_mw
        gpu.energy_mj = energy_mj
        gpu.processes = [FakeProcess(pid, memory) for pid, memory in processes]
        gpu.memory_used = sum(memory for _, memory in processes)
        self.samples.extend(samples)

    def nvmlDeviceGetProcessUtilization(
        self, handle: FakeHandle, last_seen_timestamp: int
    ) -> list[SimpleNamespace]:
        self._count("nvmlDeviceGetProcessUtilization")
        gpu = self._device(handle, "nvmlDeviceGetProcessUtilization")
        if not gpu.processes:
            raise _real.NVMLError_NotFound()
        # the driver keeps each process's newest sample: a caller that polls slower than
        # it samples (0.2 s) sees only the last one of each process
        newest_of: dict[int, Sample] = {}
        for s in self.samples:
            if s.stamp_us > last_seen_timestamp:
                kept = newest_of.get(s.pid)
                if kept is None or s.stamp_us > kept.stamp_us:
                    newest_of[s.pid] = s
        new = list(newest_of.values())
        if not new:
            raise _real.NVMLError_NotFound()
        newest = max(s.stamp_us for s in new)
        out = [
            SimpleNamespace(pid=s.pid, timeStamp=s.stamp_us, smUtil=s.sm_pct, memUtil=0)
            for s in new
        ]
        named = {s.pid for s in new}
        for p in gpu.processes:
            # an idle holder: present at 0 % in some calls, absent in others
            if p.pid not in named and self.rng.random() < 0.5:
                out.append(SimpleNamespace(pid=p.pid, timeStamp=newest, smUtil=0, memUtil=0))
        return out


def two_kernels_session(pids: dict[str, int]) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """The recorded two-kernel session's records, and recorded pid -> the pid to report."""
    data = load("two-kernels-session.json")
    mapping = {int(data["kernel_pids"][name]): pid for name, pid in pids.items()}
    return list(data["records"]), mapping


def replay_step(nvml: ReplayNvml, record: dict[str, Any], pids: dict[int, int]) -> None:
    """Set ``nvml`` to what the H100 answered in one recorded second."""
    samples: list[Sample] = []
    if isinstance(record["proc_util"], list):
        for entry in record["proc_util"]:
            pid, sm_pct = int(entry[0]), int(entry[1])
            stamp = int(entry[3]) if len(entry) > 3 else int(record["t"] * 1e6) + 1
            samples.append(Sample(pids.get(pid, pid), sm_pct, stamp))
    nvml.step(
        util=int(record["util"]),
        power_mw=int(record["power_mw"]),
        energy_mj=int(record["energy_mj"]),
        processes=[(pids.get(int(pid), int(pid)), int(memory)) for pid, memory in record["procs"]],
        samples=samples,
    )


def fast_poll_scenario(label: str, period_s: float) -> list[dict[str, Any]]:
    """One scenario of the fast polls: records of (t, samples by process name, util)."""
    for scenario in load("process-utilization-fast-polls.json")["scenarios"]:
        if scenario["label"] == label and scenario["period_s"] == period_s:
            records: list[dict[str, Any]] = scenario["records"]
            return records
    raise KeyError((label, period_s))
