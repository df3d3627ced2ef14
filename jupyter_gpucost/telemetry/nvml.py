"""Telemetry from the NVIDIA driver through NVML (the ``nvidia-ml-py`` binding, ``pynvml``).

One :class:`NvmlSource` owns NVML for the whole server. It is polled from one sampler
thread, never from the event loop: NVML calls take microseconds to milliseconds and
serialise on a driver lock.

What it does, in short (``docs/telemetry-nvml.md`` says it for admins):

* ``open()`` starts NVML and turns every start-up failure into :class:`SourceUnavailable`
  with a sentence a person can act on; it reads the driver and NVML versions once,
  enumerates the GPUs, caches what does not change (handle, name, UUID, memory size) and
  keeps only the GPUs this server may use (``CUDA_VISIBLE_DEVICES``, else
  ``NVIDIA_VISIBLE_DEVICES``: :mod:`.nvml_visibility`).
* ``read()`` never raises for a field or a device: a field the device cannot report is
  ``None`` with the reason in ``GpuReading.unavailable``; "not supported" is remembered so
  the call is not repeated every second; a GPU that is lost stays in the readings, marked
  ``lost``, because it is still rented (:mod:`.nvml_calls`).
* Versioned calls are probed once: running processes ``_v3`` -> ``_v2`` -> unversioned,
  memory info ``_v2`` -> v1.
* Each (device, field, kind of error) is logged once, not once a second.

What NVML's return codes mean is in :mod:`.nvml_codes`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import NoReturn

from ..core.i18n import N_
from .base import GpuReading, SourceUnavailable, TelemetryStatus
from .nvml_calls import NvmlCalls, NvmlDevice, lost_reading, process_reading, reading
from .nvml_codes import (
    DYNAMIC_FIELDS,
    ERR_GPU_IS_LOST,
    ERR_NO_PERMISSION,
    INIT_REASONS,
    GpuLost,
    Nvml,
    cuda_driver_version,
    error_code,
    text,
    version,
)
from .nvml_visibility import select_visible

__all__ = ["NvmlSource"]


class NvmlSource:
    """GPU readings from the NVIDIA driver (NVML).

    :param nvml: the ``pynvml`` module or a stand-in with the same names; by default
        ``pynvml`` is imported in :meth:`open`.
    :param environ: where ``CUDA_VISIBLE_DEVICES``, ``NVIDIA_VISIBLE_DEVICES`` and
        ``CUDA_DEVICE_ORDER`` are read (``os.environ`` by default), once, in :meth:`open`.
    :param log: logger; ``logging.getLogger(__name__)`` by default.
    """

    name = "nvml"
    simulated = False

    def __init__(
        self,
        *,
        nvml: Nvml | None = None,
        environ: Mapping[str, str] | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self._nvml: Nvml | None = nvml
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._log = log if log is not None else logging.getLogger(__name__)
        self._reset()
        self._failure: str | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def _reset(self) -> None:
        self._initialized = False
        self._closed = False
        self._devices: list[NvmlDevice] = []
        self._visible: list[NvmlDevice] = []
        self._detail: dict[str, str] = {}
        self._visibility_reason: str | None = None
        self._calls = NvmlCalls(self._nvml, self._log)

    def open(self) -> None:
        """Start NVML and find the GPUs this server may use.

        Raises :class:`SourceUnavailable` with a sentence for the UI when NVML cannot start.
        Calling it again while open does nothing.
        """
        if self._initialized:
            return
        self._reset()
        self._failure = None
        if self._nvml is None:
            try:
                import pynvml
            except ImportError as err:
                self._fail(
                    N_(
                        "nvidia-ml-py is not installed (pip install nvidia-ml-py), "
                        "so GPUs cannot be read"
                    ),
                    err,
                )
            self._nvml = pynvml
            self._calls = NvmlCalls(pynvml, self._log)
        nvml = self._nvml

        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            reason = INIT_REASONS.get(error_code(err) or 0, f"NVML failed to start: {err}")
            self._fail(reason, err)
        except Exception as err:  # a broken or mismatched binding
            self._fail(f"NVML failed to start: {err}", err)
        self._initialized = True

        self._detail["driver_version"] = version(nvml, "nvmlSystemGetDriverVersion")
        self._detail["nvml_version"] = version(nvml, "nvmlSystemGetNVMLVersion")
        cuda = cuda_driver_version(nvml)
        if cuda:
            self._detail["cuda_driver_version"] = cuda

        try:
            count = int(nvml.nvmlDeviceGetCount())
            self._devices = [self._probe_device(i) for i in range(count)]
            self._detail["device_count"] = str(count)
            chosen = select_visible(self._devices, self._environ, nvml, self._log)
            self._visible = chosen.devices
            self._detail.update(chosen.detail)
            self._visibility_reason = chosen.reason
        except Exception as err:
            self._shutdown()
            self._initialized = False
            if isinstance(err, nvml.NVMLError):
                self._fail(f"NVML started but could not list the GPUs: {err}", err)
            self._log.exception("NVML: listing the GPUs failed")
            self._fail(f"NVML started but listing the GPUs failed: {err}", err)
        self._log.info(
            "NVML telemetry: driver %s, %d of %d GPU(s) visible%s",
            self._detail["driver_version"],
            len(self._visible),
            count,
            "".join(f"; GPU {i}: {d.name} ({d.uuid})" for i, d in enumerate(self._visible)),
        )

    def close(self) -> None:
        """Shut NVML down. Safe to call twice; errors are logged at debug level only."""
        if self._initialized:
            self._shutdown()
        self._initialized = False
        self._closed = True

    def _shutdown(self) -> None:
        if self._nvml is None:
            return
        try:
            self._nvml.nvmlShutdown()
        except Exception as err:
            self._log.debug("nvmlShutdown failed: %s", err)

    def _fail(self, reason: str, err: BaseException) -> NoReturn:
        self._failure = reason
        raise SourceUnavailable(reason) from err

    # -- status ---------------------------------------------------------------------------

    def status(self) -> TelemetryStatus:
        """Where the readings come from, and why some may be missing."""
        detail = dict(self._detail)
        if not self._initialized:
            if self._failure is not None:
                reason = self._failure
            elif self._closed:
                reason = N_("NVML telemetry is closed")
            else:
                reason = N_("NVML telemetry is not opened yet")
            return TelemetryStatus(
                source=self.name, simulated=False, available=False, reason=reason, detail=detail
            )
        process_call = self._calls.process_call
        if process_call is not None:
            detail["process_call"] = process_call
        reasons: list[str] = []
        if self._visibility_reason is not None:
            reasons.append(self._visibility_reason)
        for pos, dev in enumerate(self._visible):
            if dev.lost:
                reasons.append(
                    f"GPU {pos} is lost ({dev.name}, NVML index {dev.nvml_index}): "
                    "it no longer answers the driver and is still billed; "
                    "it needs a GPU reset or a reboot"
                )
        return TelemetryStatus(
            source=self.name,
            simulated=False,
            available=True,
            reason="; ".join(reasons) or None,
            detail=detail,
        )

    # -- reading --------------------------------------------------------------------------

    def read(self) -> tuple[GpuReading, ...]:
        """One reading per visible GPU, in the order CUDA numbers them. Never raises."""
        if not self._initialized:
            return ()
        return tuple(self._read_device(pos, dev) for pos, dev in enumerate(self._visible))

    def _read_device(self, pos: int, dev: NvmlDevice) -> GpuReading:
        if dev.lost:
            return lost_reading(pos, dev)
        nvml = self._nvml
        calls = self._calls
        assert nvml is not None
        unavailable: dict[str, str] = {}
        try:
            util = calls.field(
                dev, "utilization_pct", nvml.nvmlDeviceGetUtilizationRates, unavailable
            )
            memory = calls.field(dev, "memory_used_bytes", calls.memory_info, unavailable)
            power_mw = calls.field(dev, "power_w", nvml.nvmlDeviceGetPowerUsage, unavailable)
            energy_mj = calls.field(
                dev, "energy_j", nvml.nvmlDeviceGetTotalEnergyConsumption, unavailable
            )
            procs = calls.field(dev, "processes", calls.running_processes, unavailable)
            dev.has_processes = bool(procs)
            sm_util: dict[int, tuple[float, int]] | None = None
            if procs:
                sm_util = calls.field(
                    dev,
                    "process_utilization",
                    lambda handle: calls.process_utilization(dev, handle),
                    unavailable,
                )
        except GpuLost:
            dev.lost = True
            calls.log_once(
                dev,
                "device",
                "gpu_lost",
                logging.WARNING,
                "GPU %d (%s, NVML index %d) is lost: it no longer answers the driver; "
                "it is still counted as rented",
                pos,
                dev.name,
                dev.nvml_index,
            )
            return lost_reading(pos, dev)
        except Exception as err:  # a bug or a binding surprise: never kill the sampler
            calls.log_once(
                dev,
                "device",
                type(err).__name__,
                logging.ERROR,
                "reading GPU %d (%s) failed: %s",
                pos,
                dev.name,
                err,
                exc_info=True,
            )
            return reading(pos, dev, unavailable=dict.fromkeys(DYNAMIC_FIELDS, f"error: {err}"))

        memory_used = None
        if memory is not None:
            memory_used = int(memory.used)
            if dev.memory_total_bytes is None:
                dev.memory_total_bytes = int(memory.total)
        processes = None
        if procs is not None:
            processes = tuple(process_reading(p, sm_util) for p in procs)
        return reading(
            pos,
            dev,
            memory_used_bytes=memory_used,
            utilization_pct=None if util is None else float(util.gpu),
            power_w=None if power_mw is None else power_mw / 1000.0,
            energy_j=None if energy_mj is None else energy_mj / 1000.0,
            processes=processes,
            unavailable=unavailable,
        )

    def poll(self) -> None:
        """Collect each GPU's per-process SM samples between readings (4 Hz or faster).

        Called from the sampler's thread; never raises. A GPU with no compute process at
        the last reading (NVML would answer NOT_FOUND, 3 ms a call on an H100), whose
        per-process utilisation is not supported, or that is lost, is skipped.
        """
        if not self._initialized or self._nvml is None:
            return
        for dev in self._visible:
            if (
                dev.lost
                or not dev.has_processes
                or "process_utilization" in dev.unsupported
                or dev.handle is None
            ):
                continue
            try:
                self._calls.collect_process_samples(dev, dev.handle)
            except Exception as err:  # the next reading's call records why
                self._log.debug("NVML: collecting process samples failed: %s", err)

    def read_energy_j(self) -> dict[int, float]:
        """Only the energy counters (microseconds per GPU), for measuring one cell."""
        nvml = self._nvml
        if not self._initialized or nvml is None:
            return {}
        out: dict[int, float] = {}
        for pos, dev in enumerate(self._visible):
            if dev.lost or "energy_j" in dev.unsupported:
                continue
            try:
                out[pos] = nvml.nvmlDeviceGetTotalEnergyConsumption(dev.handle) / 1000.0
            except nvml.NVMLError:
                continue
        return out

    # -- enumeration ----------------------------------------------------------------------

    def _probe_device(self, index: int) -> NvmlDevice:
        """Handle, name, UUID and memory size of one device: read once, kept."""
        nvml = self._nvml
        assert nvml is not None
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except nvml.NVMLError as err:
            code = error_code(err)
            dev = NvmlDevice(
                nvml_index=index, handle=None, name="unknown GPU", uuid=f"nvml:{index}"
            )
            if code == ERR_NO_PERMISSION:
                # cgroups hide this GPU from us: it belongs to another container/user
                dev.inaccessible = True
                self._log.info("NVML: GPU %d is not accessible to this server: %s", index, err)
            else:
                dev.lost = True
                dev.lost_reason = "gpu lost" if code == ERR_GPU_IS_LOST else f"no handle: {err}"
                self._log.warning("NVML: cannot open GPU %d: %s", index, err)
            return dev
        dev = NvmlDevice(nvml_index=index, handle=handle, name="unknown GPU", uuid=f"nvml:{index}")
        try:
            dev.name = text(nvml.nvmlDeviceGetName(handle))
            dev.uuid = text(nvml.nvmlDeviceGetUUID(handle))
            dev.memory_total_bytes = int(self._calls.memory_info(handle).total)
        except nvml.NVMLError as err:
            if error_code(err) == ERR_GPU_IS_LOST:
                dev.lost = True
            self._log.warning("NVML: GPU %d (%s): %s", index, dev.name, err)
        return dev
