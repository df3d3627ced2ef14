"""Telemetry from the NVIDIA driver through NVML (the ``nvidia-ml-py`` binding, ``pynvml``).

One :class:`NvmlSource` owns NVML for the whole server. It is polled from one sampler
thread, never from the event loop: NVML calls take microseconds to milliseconds and
serialise on a driver lock.

What it does, in short (``docs/telemetry-nvml.md`` says it for admins):

* ``open()`` starts NVML and turns every start-up failure into :class:`SourceUnavailable`
  with a sentence a person can act on; it reads the driver and NVML versions once,
  enumerates the GPUs, caches what does not change (handle, name, UUID, memory size) and
  keeps only the GPUs this server may use (``CUDA_VISIBLE_DEVICES``, else
  ``NVIDIA_VISIBLE_DEVICES``).
* ``read()`` never raises for a field or a device: a field the device cannot report is
  ``None`` with the reason in ``GpuReading.unavailable``; "not supported" is remembered so
  the call is not repeated every second; a GPU that is lost stays in the readings, marked
  ``lost``, because it is still rented.
* Versioned calls are probed once: running processes ``_v3`` -> ``_v2`` -> unversioned,
  memory info ``_v2`` -> v1.
* Each (device, field, kind of error) is logged once, not once a second.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .base import GpuReading, ProcessReading, SourceUnavailable, TelemetryStatus

__all__ = ["NvmlSource"]

# NVML return codes (nvml.h). They are ABI and never change; the binding's own constants
# are preferred when it has them (see ``_code``).
_ERR_NO_PERMISSION = 4
_ERR_NOT_SUPPORTED = 3
_ERR_NOT_FOUND = 6
_ERR_DRIVER_NOT_LOADED = 9
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_FUNCTION_NOT_FOUND = 13
_ERR_GPU_IS_LOST = 15
_ERR_RESET_REQUIRED = 16
_ERR_OPERATING_SYSTEM = 17
_ERR_LIB_RM_VERSION_MISMATCH = 18
_ERR_UNKNOWN = 999

#: ``usedGpuMemory`` when the driver cannot tell (Windows WDDM, some vGPU and MIG setups):
#: NVML_VALUE_NOT_AVAILABLE as an unsigned long long.
_VALUE_NOT_AVAILABLE_U64 = 2**64 - 1

_INIT_REASONS: dict[int, str] = {
    _ERR_LIBRARY_NOT_FOUND: "libnvidia-ml.so not found: no NVIDIA driver on this machine",
    _ERR_DRIVER_NOT_LOADED: "NVIDIA driver is not loaded",
    _ERR_NO_PERMISSION: (
        "no permission to use the NVIDIA driver "
        "(the server's user cannot open /dev/nvidiactl or /dev/nvidia*)"
    ),
    _ERR_LIB_RM_VERSION_MISMATCH: (
        "the NVIDIA driver and libnvidia-ml.so are different versions "
        "(driver upgraded without a reboot, or a container with a mismatched library)"
    ),
    _ERR_GPU_IS_LOST: "a GPU is lost (it fell off the bus); the machine needs a GPU reset",
    _ERR_RESET_REQUIRED: "a GPU needs a reset before NVML can use it",
    _ERR_OPERATING_SYSTEM: "the operating system blocked NVML",
    _ERR_UNKNOWN: "NVML failed to start: unknown error",
}

#: the reading's fields that change from one read to the next
_DYNAMIC_FIELDS = ("utilization_pct", "memory_used_bytes", "power_w", "energy_j", "processes")

#: running-process calls, newest first; the unversioned one is the v1 path with bindings
#: older than nvidia-ml-py 11.510 (newer bindings alias it to _v3 and raise
#: NVMLLibraryMismatchError when the driver lacks _v3)
_PROCESS_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)

_INDEX_RE = re.compile(r"[+-]?\d+")
_MIG_INDEX_RE = re.compile(r"(\d+):(\d+)")


class _GpuLost(Exception):
    """NVML answered NVML_ERROR_GPU_IS_LOST for a device."""


class _NotInDriver(Exception):
    """No version of a versioned call exists in this driver/binding pair."""


@dataclass
class _Device:
    """What is known about one NVML device; probed once in ``open()``."""

    nvml_index: int
    handle: Any
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


def _text(value: object) -> str:
    """NVML strings are ``bytes`` with old bindings and ``str`` with new ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _reading(pos: int, dev: _Device, **fields: Any) -> GpuReading:
    """A reading of ``dev`` at position ``pos``: its identity plus ``fields``."""
    return GpuReading(
        index=pos,
        uuid=dev.uuid,
        name=dev.name,
        nvml_index=dev.nvml_index,
        memory_total_bytes=dev.memory_total_bytes,
        **fields,
    )


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
        nvml: Any | None = None,
        environ: Mapping[str, str] | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self._nvml: Any | None = nvml
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._log = log if log is not None else logging.getLogger(__name__)
        self._reset()
        self._failure: str | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def _reset(self) -> None:
        self._initialized = False
        self._closed = False
        self._devices: list[_Device] = []
        self._visible: list[_Device] = []
        self._detail: dict[str, str] = {}
        self._visibility_reason: str | None = None
        # index into _PROCESS_CALLS of the call in use, and whether it has been proven to
        # exist (a call that answers anything but FunctionNotFound exists)
        self._process_call = 0
        self._process_call_known = False
        # None: not probed yet; True/False: nvmlDeviceGetMemoryInfo_v2 exists or not
        self._memory_v2: bool | None = None
        self._logged: set[tuple[int | None, str, str]] = set()

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
                    "nvidia-ml-py is not installed (pip install nvidia-ml-py), "
                    "so GPUs cannot be read",
                    err,
                )
            self._nvml = pynvml
        nvml = self._nvml

        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            reason = _INIT_REASONS.get(self._code(err) or 0, f"NVML failed to start: {err}")
            self._fail(reason, err)
        except Exception as err:  # a broken or mismatched binding
            self._fail(f"NVML failed to start: {err}", err)
        self._initialized = True

        self._detail["driver_version"] = self._version(nvml, "nvmlSystemGetDriverVersion")
        self._detail["nvml_version"] = self._version(nvml, "nvmlSystemGetNVMLVersion")
        cuda = self._cuda_driver_version(nvml)
        if cuda:
            self._detail["cuda_driver_version"] = cuda

        try:
            count = int(nvml.nvmlDeviceGetCount())
            self._devices = [self._probe_device(i) for i in range(count)]
            self._detail["device_count"] = str(count)
            self._select_visible()
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
        try:
            self._nvml.nvmlShutdown()  # type: ignore[union-attr]
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
                reason = "NVML telemetry is closed"
            else:
                reason = "NVML telemetry is not opened yet"
            return TelemetryStatus(
                source=self.name, simulated=False, available=False, reason=reason, detail=detail
            )
        if self._process_call_known:
            detail["process_call"] = _PROCESS_CALLS[self._process_call]
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

    def _read_device(self, pos: int, dev: _Device) -> GpuReading:
        if dev.lost:
            return self._lost_reading(pos, dev)
        nvml = self._nvml
        assert nvml is not None
        unavailable: dict[str, str] = {}
        try:
            util = self._field(
                dev, "utilization_pct", nvml.nvmlDeviceGetUtilizationRates, unavailable
            )
            memory = self._field(dev, "memory_used_bytes", self._memory_info, unavailable)
            power_mw = self._field(dev, "power_w", nvml.nvmlDeviceGetPowerUsage, unavailable)
            energy_mj = self._field(
                dev, "energy_j", nvml.nvmlDeviceGetTotalEnergyConsumption, unavailable
            )
            procs = self._field(dev, "processes", self._running_processes, unavailable)
            sm_util: dict[int, float] | None = None
            if procs:
                sm_util = self._field(
                    dev,
                    "process_utilization",
                    lambda handle: self._process_utilization(dev, handle),
                    unavailable,
                )
        except _GpuLost:
            dev.lost = True
            self._log_once(
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
            return self._lost_reading(pos, dev)
        except Exception as err:  # a bug or a binding surprise: never kill the sampler
            self._log_once(
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
            return _reading(pos, dev, unavailable=dict.fromkeys(_DYNAMIC_FIELDS, f"error: {err}"))

        memory_used = None
        if memory is not None:
            memory_used = int(memory.used)
            if dev.memory_total_bytes is None:
                dev.memory_total_bytes = int(memory.total)
        processes = None
        if procs is not None:
            processes = tuple(self._process(p, sm_util) for p in procs)
        return _reading(
            pos,
            dev,
            memory_used_bytes=memory_used,
            utilization_pct=None if util is None else float(util.gpu),
            power_w=None if power_mw is None else power_mw / 1000.0,
            energy_j=None if energy_mj is None else energy_mj / 1000.0,
            processes=processes,
            unavailable=unavailable,
        )

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

    @staticmethod
    def _process(info: Any, sm_util: dict[int, float] | None = None) -> ProcessReading:
        used = getattr(info, "usedGpuMemory", None)
        if used is not None:
            used = int(used)
            if used == _VALUE_NOT_AVAILABLE_U64 or used < 0:
                used = None
        pid = int(info.pid)
        return ProcessReading(
            pid=pid,
            used_memory_bytes=used,
            sm_utilization_pct=None if sm_util is None else sm_util.get(pid),
        )

    def _process_utilization(self, dev: _Device, handle: Any) -> dict[int, float]:
        """Each process's SM utilisation since the last call (``nvmlDeviceGetProcessUtilization``).

        NVML answers NOT_FOUND when it has no sample newer than the timestamp given: then
        no process computed, which is an answer (an empty one), not a failure.
        """
        nvml = self._nvml
        assert nvml is not None
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, dev.last_process_sample_us)
        except nvml.NVMLError as err:
            if self._code(err) == _ERR_NOT_FOUND:
                return {}
            raise
        per_pid: dict[int, list[float]] = {}
        for sample in samples:
            stamp = int(getattr(sample, "timeStamp", 0))
            dev.last_process_sample_us = max(dev.last_process_sample_us, stamp)
            per_pid.setdefault(int(sample.pid), []).append(float(sample.smUtil))
        return {pid: sum(values) / len(values) for pid, values in per_pid.items()}

    @staticmethod
    def _lost_reading(pos: int, dev: _Device) -> GpuReading:
        return _reading(
            pos,
            dev,
            lost=True,
            unavailable=dict.fromkeys(_DYNAMIC_FIELDS, dev.lost_reason),
        )

    def _field(
        self,
        dev: _Device,
        name: str,
        call: Callable[[Any], Any],
        unavailable: dict[str, str],
    ) -> Any:
        """``call(handle)``, or ``None`` with the reason recorded in ``unavailable``."""
        known = dev.unsupported.get(name)
        if known is not None:
            unavailable[name] = known
            return None
        nvml = self._nvml
        assert nvml is not None
        try:
            return call(dev.handle)
        except _NotInDriver:
            reason = "not supported by this NVIDIA driver"
            dev.unsupported[name] = reason
            self._log_once(
                None,
                name,
                "not_in_driver",
                logging.INFO,
                "NVML: %s not available: this driver has none of %s",
                name,
                ", ".join(_PROCESS_CALLS),
            )
        except nvml.NVMLError as err:
            code = self._code(err)
            if code == _ERR_GPU_IS_LOST:
                raise _GpuLost from err
            if code == _ERR_NOT_SUPPORTED:
                reason = "not supported"
                dev.unsupported[name] = reason
                level = logging.INFO
            elif code == _ERR_FUNCTION_NOT_FOUND:
                reason = "not supported by this NVIDIA driver"
                dev.unsupported[name] = reason
                level = logging.INFO
            elif code == _ERR_UNKNOWN:
                reason = "unknown error"
                level = logging.WARNING
            else:
                reason = str(err)
                level = logging.WARNING
            self._log_once(
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

    def _memory_info(self, handle: Any) -> Any:
        """``nvmlDeviceGetMemoryInfo``, v2 when the driver has it (>= 510).

        With v2 ``used`` leaves out the memory the driver reserves for itself, as
        nvidia-smi does; v1 counts it as used on recent drivers.
        """
        nvml = self._nvml
        assert nvml is not None
        version = getattr(nvml, "nvmlMemory_v2", None)
        if self._memory_v2 is not False and version is not None:
            try:
                info = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            except nvml.NVMLError as err:
                if self._code(err) != _ERR_FUNCTION_NOT_FOUND:
                    self._memory_v2 = True
                    raise
                self._memory_v2 = False
            else:
                self._memory_v2 = True
                return info
        return nvml.nvmlDeviceGetMemoryInfo(handle)

    def _running_processes(self, handle: Any) -> Any:
        """Compute processes on a device, through the newest call the driver has.

        The call in use is found once (FunctionNotFound moves to the next one) and kept.
        """
        nvml = self._nvml
        assert nvml is not None
        mismatch = getattr(nvml, "NVMLLibraryMismatchError", None)
        while self._process_call < len(_PROCESS_CALLS):
            call = getattr(nvml, _PROCESS_CALLS[self._process_call], None)
            if call is None:  # the binding predates this version of the call
                self._process_call += 1
                continue
            if self._process_call_known:
                return call(handle)
            try:
                result = call(handle)
            except nvml.NVMLError as err:
                if self._code(err) == _ERR_FUNCTION_NOT_FOUND:
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
        raise _NotInDriver

    # -- enumeration ----------------------------------------------------------------------

    def _probe_device(self, index: int) -> _Device:
        """Handle, name, UUID and memory size of one device: read once, kept."""
        nvml = self._nvml
        assert nvml is not None
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except nvml.NVMLError as err:
            code = self._code(err)
            dev = _Device(nvml_index=index, handle=None, name="unknown GPU", uuid=f"nvml:{index}")
            if code == _ERR_NO_PERMISSION:
                # cgroups hide this GPU from us: it belongs to another container/user
                dev.inaccessible = True
                self._log.info("NVML: GPU %d is not accessible to this server: %s", index, err)
            else:
                dev.lost = True
                dev.lost_reason = "gpu lost" if code == _ERR_GPU_IS_LOST else f"no handle: {err}"
                self._log.warning("NVML: cannot open GPU %d: %s", index, err)
            return dev
        dev = _Device(nvml_index=index, handle=handle, name="unknown GPU", uuid=f"nvml:{index}")
        try:
            dev.name = _text(nvml.nvmlDeviceGetName(handle))
            dev.uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            dev.memory_total_bytes = int(self._memory_info(handle).total)
        except nvml.NVMLError as err:
            if self._code(err) == _ERR_GPU_IS_LOST:
                dev.lost = True
            self._log.warning("NVML: GPU %d (%s): %s", index, dev.name, err)
        return dev

    def _select_visible(self) -> None:
        env = self._environ
        devices = [d for d in self._devices if not d.inaccessible]
        notes: list[str] = []
        if "CUDA_VISIBLE_DEVICES" in env:
            raw = env["CUDA_VISIBLE_DEVICES"]
            self._detail["visibility"] = f"CUDA_VISIBLE_DEVICES={raw}"
            visible = self._cuda_visible(raw, notes)
            if not visible and self._devices:
                self._visibility_reason = (
                    f"no GPU visible to this server: CUDA_VISIBLE_DEVICES={raw!r} names none"
                )
        elif "NVIDIA_VISIBLE_DEVICES" in env:
            raw = env["NVIDIA_VISIBLE_DEVICES"]
            self._detail["visibility"] = f"NVIDIA_VISIBLE_DEVICES={raw}"
            visible = self._nvidia_visible(raw, devices, notes)
            if not visible and self._devices:
                self._visibility_reason = (
                    f"no GPU visible to this server: NVIDIA_VISIBLE_DEVICES={raw!r}"
                )
        else:
            self._detail["visibility"] = "all GPUs (CUDA_VISIBLE_DEVICES is not set)"
            visible = devices
        if not self._devices:
            self._visibility_reason = "NVML found no GPU on this machine"
        hidden = [d.nvml_index for d in self._devices if d.inaccessible]
        if hidden:
            notes.append(
                "NVML index(es) "
                + ",".join(map(str, hidden))
                + " refused with 'Insufficient Permissions': GPUs of the host not given to "
                "this server"
            )
        self._visible = visible
        self._detail["visible_devices"] = ",".join(str(d.nvml_index) for d in visible)
        order = env.get("CUDA_DEVICE_ORDER", "")
        if len(visible) > 1 and order != "PCI_BUS_ID":
            self._detail["device_order"] = (
                "GPU numbers and CUDA_VISIBLE_DEVICES indices are read in NVML (PCI bus) "
                "order; CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, "
                "so with GPUs of different models cuda:N may not be GPU N here"
            )
        if notes:
            self._detail["visibility_notes"] = "; ".join(notes)
            for note in notes:
                self._log.warning("NVML: %s", note)

    def _cuda_visible(self, raw: str, notes: list[str]) -> list[_Device]:
        """CUDA's rules: listed order; the first invalid entry ends the list."""
        if not raw.strip():
            return []
        chosen: list[_Device] = []
        for entry in (e.strip() for e in raw.split(",")):
            if entry.upper().startswith("MIG-"):
                dev = self._mig_parent(entry)
                if dev is None:
                    notes.append(
                        f"CUDA_VISIBLE_DEVICES entry {entry!r} is a MIG device whose GPU could "
                        "not be found; it is not read"
                    )
                    continue
                notes.append(
                    f"{entry} is a MIG slice of NVML GPU {dev.nvml_index} ({dev.name}); "
                    "readings are for the whole GPU"
                )
            else:
                dev, why = self._match(entry)
                if dev is None:
                    notes.append(
                        f"CUDA_VISIBLE_DEVICES entry {entry!r} {why}; CUDA ignores it and "
                        "every entry after it"
                    )
                    break
            if dev in chosen:
                notes.append(f"CUDA_VISIBLE_DEVICES names NVML GPU {dev.nvml_index} twice")
                continue
            chosen.append(dev)
        return chosen

    def _nvidia_visible(self, raw: str, devices: list[_Device], notes: list[str]) -> list[_Device]:
        """The NVIDIA container runtime's variable: ``all``, ``none``/``void``/empty, a list.

        Inside a container the runtime has already mounted only the listed GPUs and NVML
        numbers them from 0, so a list of host indices as long as the GPUs NVML sees is
        taken as "all of them".
        """
        value = raw.strip()
        if value.lower() == "all":
            return devices
        if value.lower() in ("", "none", "void"):
            return []
        entries = [e.strip() for e in value.split(",") if e.strip()]
        by_index = all(_INDEX_RE.fullmatch(e) or _MIG_INDEX_RE.fullmatch(e) for e in entries)
        parents = {e.split(":", 1)[0] for e in entries}
        if by_index and len(parents) == len(devices):
            return devices
        chosen: list[_Device] = []
        for entry in entries:
            mig = _MIG_INDEX_RE.fullmatch(entry)
            if mig:
                dev, why = self._match(mig.group(1))
            elif entry.upper().startswith("MIG-"):
                dev = self._mig_parent(entry)
                why = "is a MIG device whose GPU could not be found"
            else:
                dev, why = self._match(entry)
            if dev is None:
                notes.append(f"NVIDIA_VISIBLE_DEVICES entry {entry!r} {why}; it is skipped")
            elif dev not in chosen:
                chosen.append(dev)
        return sorted(chosen, key=lambda d: d.nvml_index)

    def _match(self, entry: str) -> tuple[_Device | None, str]:
        """An index (NVML order) or a UUID or unique UUID prefix, as CUDA accepts them."""
        if _INDEX_RE.fullmatch(entry):
            index = int(entry)
            if 0 <= index < len(self._devices) and not self._devices[index].inaccessible:
                return self._devices[index], ""
            return None, f"is not a GPU index (NVML sees {len(self._devices)} GPU(s))"
        if entry.upper().startswith("GPU-"):
            prefix = entry.lower()
            hits = [
                d for d in self._devices if not d.inaccessible and d.uuid.lower().startswith(prefix)
            ]
            if len(hits) == 1:
                return hits[0], ""
            if hits:
                return None, "is a UUID prefix shared by several GPUs"
            return None, "matches no GPU's UUID"
        return None, "is neither a GPU index nor a GPU UUID"

    def _mig_parent(self, entry: str) -> _Device | None:
        """The physical GPU of a MIG device (``MIG-<uuid>`` or ``MIG-GPU-<uuid>/gi/ci``)."""
        rest = entry[4:]
        if rest.upper().startswith("GPU-"):  # the pre-R470 form names its parent
            uuid = rest.split("/", 1)[0].lower()
            for dev in self._devices:
                if dev.uuid.lower() == uuid and not dev.inaccessible:
                    return dev
            return None
        nvml = self._nvml
        assert nvml is not None
        try:
            mig = nvml.nvmlDeviceGetHandleByUUID(entry)
            parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
            index = int(nvml.nvmlDeviceGetIndex(parent))
        except (nvml.NVMLError, AttributeError) as err:
            self._log.debug("NVML: cannot map %s to its GPU: %s", entry, err)
            return None
        if 0 <= index < len(self._devices) and not self._devices[index].inaccessible:
            return self._devices[index]
        return None

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def _code(err: BaseException) -> int | None:
        value = getattr(err, "value", None)
        return value if isinstance(value, int) else None

    @staticmethod
    def _version(nvml: Any, call: str) -> str:
        try:
            return _text(getattr(nvml, call)())
        except Exception:
            return "unknown"

    @staticmethod
    def _cuda_driver_version(nvml: Any) -> str | None:
        """The newest CUDA the driver supports, e.g. 12040 -> "12.4"."""
        try:
            version = int(nvml.nvmlSystemGetCudaDriverVersion())
        except Exception:
            return None
        return f"{version // 1000}.{version % 1000 // 10}"

    def _log_once(
        self,
        dev: _Device | None,
        field_name: str,
        kind: str,
        level: int,
        msg: str,
        *args: Any,
        exc_info: bool = False,
    ) -> None:
        key = (None if dev is None else dev.nvml_index, field_name, kind)
        if key in self._logged:
            return
        self._logged.add(key)
        self._log.log(level, msg, *args, exc_info=exc_info)
