"""Opening the telemetry source the server's ``c.GpuCost.telemetry`` names: NVML, the
simulated trace, or none; a source that cannot open becomes :class:`~.base.NoTelemetry`
with the reason, never an exception."""

from __future__ import annotations

import logging

from .base import NoTelemetry, SourceUnavailable, TelemetrySource
from .simulated import SimulatedSource


def open_source(mode: str, *, simulated_trace: str = "", log: logging.Logger) -> TelemetrySource:
    """Open the telemetry source for ``mode``; never raises: failures become NoTelemetry."""
    if mode == "none":
        return NoTelemetry("GPU telemetry is turned off (c.GpuCost.telemetry = 'none')")
    if mode == "simulated":
        source: TelemetrySource = SimulatedSource(simulated_trace or None)
    else:
        from .nvml import NvmlSource

        source = NvmlSource(log=log)
    try:
        source.open()
    except SourceUnavailable as e:
        if mode == "auto":
            log.info("jupyter-gpucost: no NVML (%s); GPU telemetry is off", e.reason)
            return NoTelemetry(f"no NVIDIA GPU telemetry: {e.reason}")
        log.error("jupyter-gpucost: %s telemetry unavailable: %s", mode, e.reason)
        return NoTelemetry(e.reason)
    log.info("jupyter-gpucost: telemetry from %s", source.name)
    return source
