"""Reading one NVML field of one device: typed "not available", versioned calls, processes.

:class:`NvmlCalls` wraps the calls :class:`~.nvml.NvmlSource` makes every second. A field
the device cannot report becomes ``None`` with its reason (and "not supported" is
remembered, so it is not asked again); versioned calls are probed once (running processes
``_v3`` -> ``_v2`` -> unversioned, memory info ``_v2`` -> v1); each (device, field, kind of
error) is logged once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .base import GpuReading, ProcessReading
from .nvml_codes import (
    DYNAMIC_FIELDS,
    ERR_FUNCTION_NOT_FOUND,
    ERR_GPU_IS_LOST,
    ERR_NOT_FOUND,
    ERR_NOT_SUPPORTED,
    ERR_UNKNOWN,
    PROCESS_CALLS,
    VALUE_NOT_AVAILABLE_U64,
    GpuLost,
    Handle,
    NotInDriver,
    Nvml,
    error_code,
)

T = TypeVar("T")


@dataclass
class NvmlDevice:
    """What is known about one NVML device; probed once when the source opens."""

    nvml_index: int
    handle: Handle
    name: str
    uuid: str
    memory_total_bytes: int | None = None
    lost: bool = False
    #: why the device's handle could not be used at all (then ``lost`` is set)
    lost_reason: str = "gpu lost"
    #: NVML refused a handle (NoPermission: a GPU of the host not given to this container)
    inaccessible: bool = False
    #: field -> reason, for calls that will not work on this device (not asked again)
    unsupported: dict[str, str] = field(default_factory=dict)
    #: NVML timestamp (µs) of the newest per-process utilisation sample seen
    last_process_sample_us: int = 0
    #: pid -> [sum of SM %, number of samples] collected since the last reading
    process_samples: dict[int, list[float]] = field(default_factory=dict)
    #: the last reading listed compute processes (only then are samples polled between)
    has_processes: bool = False


def reading(
    pos: int,
    dev: NvmlDevice,
    *,
    memory_used_bytes: int | None = None,
    utilization_pct: float | None = None,
    power_w: float | None = None,
    energy_j: float | None = None,
    processes: tuple[ProcessReading, ...] | None = None,
    lost: bool = False,
    unavailable: dict[str, str] | None = None,
) -> GpuReading:
    """A reading of ``dev`` at position ``pos``: its identity plus what was read."""
    return GpuReading(
        index=pos,
        uuid=dev.uuid,
        name=dev.name,
        nvml_index=dev.nvml_index,
        memory_total_bytes=dev.memory_total_bytes,
        memory_used_bytes=memory_used_bytes,
        utilization_pct=utilization_pct,
        power_w=power_w,
        energy_j=energy_j,
        processes=processes,
        lost=lost,
        unavailable={} if unavailable is None else unavailable,
    )


def lost_reading(pos: int, dev: NvmlDevice) -> GpuReading:
    """The reading of a lost GPU: still there (it is rented), every dynamic field missing."""
    return reading(pos, dev, lost=True, unavailable=dict.fromkeys(DYNAMIC_FIELDS, dev.lost_reason))


def process_reading(
    info: Any, sm_util: dict[int, tuple[float, int]] | None = None
) -> ProcessReading:
    """One entry of NVML's running-process list as a :class:`ProcessReading`.

    ``sm_util``: pid -> (sum of SM %, number of samples) over the reading's interval."""
    used = getattr(info, "usedGpuMemory", None)
    if used is not None:
        used = int(used)
        if used == VALUE_NOT_AVAILABLE_U64 or used < 0:
            used = None
    pid = int(info.pid)
    sampled = None if sm_util is None else sm_util.get(pid)
    if sampled is None or sampled[1] <= 0:
        return ProcessReading(pid=pid, used_memory_bytes=used)
    total, count = sampled
    return ProcessReading(
        pid=pid, used_memory_bytes=used, sm_utilization_pct=total / count, sm_samples=count
    )


class NvmlCalls:
    """The per-second NVML calls of one open session, with what was learnt about them."""

    def __init__(self, nvml: Nvml, log: logging.Logger) -> None:
        self._nvml = nvml
        self._log = log
        # index into PROCESS_CALLS of the call in use, and whether it has been proven to
        # exist (a call that answers anything but FunctionNotFound exists)
        self._process_call = 0
        self._process_call_known = False
        # None: not probed yet; True/False: nvmlDeviceGetMemoryInfo_v2 exists or not
        self._memory_v2: bool | None = None
        self._logged: set[tuple[int | None, str, str]] = set()

    @property
    def process_call(self) -> str | None:
        """The running-process call in use, once one has been proven to exist."""
        return PROCESS_CALLS[self._process_call] if self._process_call_known else None

    def field(
        self,
        dev: NvmlDevice,
        name: str,
        call: Callable[[Handle], T],
        unavailable: dict[str, str],
    ) -> T | None:
        """``call(handle)``, or ``None`` with the reason recorded in ``unavailable``.

        Raises :class:`GpuLost` when NVML says the device is lost.
        """
        known = dev.unsupported.get(name)
        if known is not None:
            unavailable[name] = known
            return None
        nvml = self._nvml
        try:
            return call(dev.handle)
        except NotInDriver:
            reason = "not supported by this NVIDIA driver"
            dev.unsupported[name] = reason
            self.log_once(
                None,
                name,
                "not_in_driver",
                logging.INFO,
                "NVML: %s not available: this driver has none of %s",
                name,
                ", ".join(PROCESS_CALLS),
            )
        except nvml.NVMLError as err:
            code = error_code(err)
            if code == ERR_GPU_IS_LOST:
                raise GpuLost from err
            if code == ERR_NOT_SUPPORTED:
                reason = "not supported"
                dev.unsupported[name] = reason
                level = logging.INFO
            elif code == ERR_FUNCTION_NOT_FOUND:
                reason = "not supported by this NVIDIA driver"
                dev.unsupported[name] = reason
                level = logging.INFO
            elif code == ERR_UNKNOWN:
                reason = "unknown error"
                level = logging.WARNING
            else:
                reason = str(err)
                level = logging.WARNING
            self.log_once(
                dev,
                name,
                str(code),
                level,
                "NVML: %s of GPU %d (%s): %s",
                name,
                dev.nvml_index,
                dev.name,
                reason,
            )
        unavailable[name] = reason
        return None

    def memory_info(self, handle: Handle) -> Any:
        """``nvmlDeviceGetMemoryInfo``, v2 when the driver has it (>= 510).

        With v2 ``used`` leaves out the memory the driver reserves for itself, as
        nvidia-smi does; v1 counts it as used on recent drivers.
        """
        nvml = self._nvml
        version = getattr(nvml, "nvmlMemory_v2", None)
        if self._memory_v2 is not False and version is not None:
            try:
                info = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            except nvml.NVMLError as err:
                if error_code(err) != ERR_FUNCTION_NOT_FOUND:
                    self._memory_v2 = True
                    raise
                self._memory_v2 = False
            else:
                self._memory_v2 = True
                return info
        return nvml.nvmlDeviceGetMemoryInfo(handle)

    def running_processes(self, handle: Handle) -> Any:
        """Compute processes on a device, through the newest call the driver has.

        The call in use is found once (FunctionNotFound moves to the next one) and kept.
        """
        nvml = self._nvml
        mismatch = getattr(nvml, "NVMLLibraryMismatchError", None)
        while self._process_call < len(PROCESS_CALLS):
            call = getattr(nvml, PROCESS_CALLS[self._process_call], None)
            if call is None:  # the binding predates this version of the call
                self._process_call += 1
                continue
            if self._process_call_known:
                return call(handle)
            try:
                result = call(handle)
            except nvml.NVMLError as err:
                if error_code(err) == ERR_FUNCTION_NOT_FOUND:
                    self._process_call += 1
                    continue
                self._process_call_known = True
                raise
            except Exception as err:
                if mismatch is not None and isinstance(err, mismatch):
                    self._process_call += 1
                    continue
                raise
            self._process_call_known = True
            return result
        raise NotInDriver

    def collect_process_samples(self, dev: NvmlDevice, handle: Handle) -> None:
        """Add the per-process samples NVML took since the last call to ``dev``'s tally.

        The driver samples about every 0.2 s and each sample names the process that
        dominated it (an idle process holding memory shows at 0 % or not at all), so the
        samples are collected several times a second and added up per process: over a
        billing interval they say who computed, and split comparable concurrent work.
        NVML answers NOT_FOUND when it has no sample newer than the timestamp given (or
        no process has a context): nothing to add, not a failure.
        """
        nvml = self._nvml
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, dev.last_process_sample_us)
        except nvml.NVMLError as err:
            if error_code(err) == ERR_NOT_FOUND:
                return
            raise
        first = dev.last_process_sample_us == 0
        newest = dev.last_process_sample_us
        for sample in samples:
            stamp = int(getattr(sample, "timeStamp", 0))
            newest = max(newest, stamp)
            if first or stamp <= dev.last_process_sample_us:
                # the first call (timestamp 0) answers each process's last sample, however
                # old: it sets where counting starts, and counts nothing
                continue
            tally = dev.process_samples.setdefault(int(sample.pid), [0.0, 0])
            tally[0] += float(sample.smUtil)
            tally[1] += 1
        dev.last_process_sample_us = newest

    def process_utilization(self, dev: NvmlDevice, handle: Handle) -> dict[int, tuple[float, int]]:
        """Each process's SM samples since the last reading: pid -> (sum of SM %, count)."""
        self.collect_process_samples(dev, handle)
        collected = {pid: (v[0], int(v[1])) for pid, v in dev.process_samples.items()}
        dev.process_samples.clear()
        return collected

    def log_once(
        self,
        dev: NvmlDevice | None,
        field_name: str,
        kind: str,
        level: int,
        msg: str,
        *args: object,
        exc_info: bool = False,
    ) -> None:
        """Log ``msg`` the first time this (device, field, kind of error) is seen."""
        key = (None if dev is None else dev.nvml_index, field_name, kind)
        if key in self._logged:
            return
        self._logged.add(key)
        self._log.log(level, msg, *args, exc_info=exc_info)
