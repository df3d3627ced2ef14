"""What one reading of the GPUs holds: the values the meter prices.

Every telemetry source (NVML, a recorded trace, nothing) produces these; the meter in
:mod:`.meter` consumes them. They live here, below both, so that pricing depends on the
shape of a reading and never on a source. Fields a device cannot report are ``None``, and
the reason is kept in :attr:`GpuReading.unavailable` (field name -> reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProcessReading:
    """A process holding a compute context on a GPU, as the driver reports it."""

    pid: int
    #: ``None`` when the driver does not expose per-process memory (Windows WDDM, some vGPUs).
    used_memory_bytes: int | None = None
    #: mean SM utilisation (0-100) of the per-process samples the driver gave for this
    #: process since the last reading (``nvmlDeviceGetProcessUtilization``); ``None`` when
    #: it gave none for this process
    sm_utilization_pct: float | None = None
    #: how many such samples there were (the driver samples about every 0.2 s and names
    #: only the process that dominated each sample); 0 with a mean means "one, unknown"
    sm_samples: int = 0

    @property
    def sm_pct_sum(self) -> float:
        """The process's SM samples added up over the interval: its weight in the split."""
        if self.sm_utilization_pct is None:
            return 0.0
        return self.sm_utilization_pct * max(self.sm_samples, 1)


@dataclass(frozen=True)
class GpuReading:
    """One device at one instant.

    ``index`` is the position among the GPUs this server may use (after
    ``CUDA_VISIBLE_DEVICES``), ``nvml_index`` the driver's own index.
    """

    index: int
    uuid: str
    name: str
    nvml_index: int | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    #: percent of the last sample period in which a kernel ran on the GPU (0-100)
    utilization_pct: float | None = None
    power_w: float | None = None
    #: cumulative energy since the driver was loaded (NVML's total energy counter)
    energy_j: float | None = None
    processes: tuple[ProcessReading, ...] | None = None
    #: the device stopped answering (NVML_ERROR_GPU_IS_LOST); it is still rented
    lost: bool = False
    #: field name -> why it is ``None`` (e.g. ``{"power_w": "not supported"}``)
    unavailable: dict[str, str] = field(default_factory=dict)
