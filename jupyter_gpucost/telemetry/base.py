"""Reading types shared by every telemetry source.

A telemetry source turns whatever it watches (NVML, a recorded trace, nothing) into
:class:`GpuReading` values. Fields a device cannot report are ``None``, and the reason is
kept in :attr:`GpuReading.unavailable` (field name -> reason), so the meter, the API and
the UI can say *why* a number is missing instead of showing a made-up one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


class SourceUnavailable(Exception):
    """The source cannot be opened at all; ``reason`` is shown to the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


@dataclass(frozen=True)
class TelemetryStatus:
    """What the UI says about where the readings come from."""

    source: str  # "nvml" | "simulated" | "none"
    simulated: bool
    available: bool
    #: why the source is degraded or unavailable; ``None`` when all is well
    reason: str | None = None
    #: e.g. driver and NVML versions, or the trace's name
    detail: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class PollingSource(Protocol):
    """A source that also collects something between readings (NVML's per-process
    samples), called from the sampler's thread several times a second."""

    def poll(self) -> None:
        """Collect what would be lost by the next reading; must not raise."""


@runtime_checkable
class TelemetrySource(Protocol):
    """Something that can be polled for GPU readings from one thread."""

    name: str
    simulated: bool

    def open(self) -> None:
        """Acquire the underlying library; raise :class:`SourceUnavailable` on failure."""

    def read(self) -> tuple[GpuReading, ...]:
        """Read every device once. Must not raise for per-device or per-field errors."""

    def status(self) -> TelemetryStatus:
        """Describe the source for the UI."""

    def close(self) -> None:
        """Release the underlying library. Safe to call twice."""


class NoTelemetry:
    """No GPUs are watched: cost is the instance base price only."""

    name = "none"
    simulated = False

    def __init__(self, reason: str | None = None) -> None:
        self._reason = reason

    def open(self) -> None:
        return None

    def read(self) -> tuple[GpuReading, ...]:
        return ()

    def status(self) -> TelemetryStatus:
        return TelemetryStatus(source="none", simulated=False, available=False, reason=self._reason)

    def close(self) -> None:
        return None
