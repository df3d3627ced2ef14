"""Reading types shared by every telemetry source.

A telemetry source turns whatever it watches (NVML, a recorded trace, nothing) into
:class:`GpuReading` values. Fields a device cannot report are ``None``, and the reason is
kept in :attr:`GpuReading.unavailable` (field name -> reason), so the meter, the API and
the UI can say *why* a number is missing instead of showing a made-up one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..core.readings import GpuReading, ProcessReading

__all__ = [
    "GpuReading",
    "NoTelemetry",
    "PollingSource",
    "ProcessReading",
    "SourceUnavailable",
    "TelemetrySource",
    "TelemetryStatus",
]


class SourceUnavailable(Exception):
    """The source cannot be opened at all; ``reason`` is shown to the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
