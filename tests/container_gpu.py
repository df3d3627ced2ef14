"""NVML as it answers inside a container (a stand-in for the server's ``pynvml``).

What the driver does there, and this copies (NVIDIA on nvidia-docker #179 and #1483: the
driver has no notion of PID namespaces; ``docs/telemetry-nvml.md``):

* every pid NVML lists is a *host* pid: here the container's pid plus a fixed offset, so
  none of them is a pid of the server's namespace;
* a GPU shared with other containers lists their processes too (other tenants: host pids
  with no counterpart in this container);
* the per-process samples are the H100's (``nvml_replay.ReplayNvml``): each names only the
  process that dominated it, an idle holder appears at 0 % or not at all;
* the processes of this container are those whose CUDA stand-in (``cuda_standin``, in the
  kernels) wrote its memory to ``state_dir``, listed while the process lives.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import psutil
from nvml_replay import ReplayNvml, Sample
from nvml_stub import FakeHandle, FakeProcess

#: host pid = container pid + this (a pid the server's namespace does not have)
OFFSET = 3_000_000


class ContainerNvml(ReplayNvml):
    def __init__(self, state_dir: Path, tenants: dict[int, int], seed: int = 0) -> None:
        super().__init__(seed)
        self.state_dir = state_dir
        #: other containers' processes: host pid -> memory
        self.tenants = dict(tenants)
        #: host pid -> memory the recording gives it (replaces its context's)
        self.recorded: dict[int, int] = {}

    @property
    def uuid(self) -> str:
        return str(self.gpu.uuid)

    def step(
        self,
        *,
        util: int,
        power_mw: int,
        energy_mj: int,
        processes: list[tuple[int, int]],
        samples: list[Sample],
    ) -> None:
        super().step(
            util=util, power_mw=power_mw, energy_mj=energy_mj, processes=processes, samples=samples
        )
        self.recorded = dict(processes)
        self._refresh()

    def _refresh(self) -> None:
        memory: dict[int, int] = {}
        for path in sorted(self.state_dir.glob("*.json")):
            pid = int(path.stem)
            if not psutil.pid_exists(pid):
                continue  # the process ended: its context is gone
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if state.get("gpu_uuid") != self.uuid:
                continue
            host = pid + OFFSET
            # what the context holds (the recording's figure while one is replayed), and
            # the blocks the kernel allocated in it
            context = self.recorded.get(host, int(state["context_bytes"]))
            memory[host] = context + int(state["blocks_bytes"])
        memory.update(self.tenants)
        self.gpu.processes = [FakeProcess(pid, mem) for pid, mem in memory.items()]
        self.gpu.memory_used = sum(memory.values())

    def _processes(
        self, version: str, handle: FakeHandle, counted_as: str | None = None
    ) -> list[SimpleNamespace]:
        self._refresh()
        return super()._processes(version, handle, counted_as)

    def nvmlDeviceGetProcessUtilization(
        self, handle: FakeHandle, last_seen_timestamp: int
    ) -> list[SimpleNamespace]:
        self._refresh()
        return super().nvmlDeviceGetProcessUtilization(handle, last_seen_timestamp)
