"""A stand-in for the ``pynvml`` module (nvidia-ml-py) for machines without a GPU.

Modelled on gpustat's tests: fake devices with the values real boards report, fake drivers
that have (or lack) the versioned calls the real ones have, and every failure NVML can
answer. The error classes and constants are the real ones from ``pynvml``, so
``except pynvml.NVMLError_NotSupported`` means the same thing here as on a GPU machine.

What the real binding does and the stub copies:

* every device call raises ``NVMLError_Uninitialized`` before ``nvmlInit()``;
* a C function missing from the driver raises ``NVMLError_FunctionNotFound`` when it is
  looked up, before the device is touched (``pynvml._nvmlGetFunctionPointer``);
* nvidia-ml-py >= 11.510 routes the unversioned ``nvmlDeviceGetComputeRunningProcesses``
  to ``_v3`` and turns FunctionNotFound into ``NVMLLibraryMismatchError``; older bindings
  (``binding="11.450"``) call the v1 C function and have no ``_v3`` nor ``nvmlMemory_v2``;
* drivers >= 510 have ``nvmlDeviceGetMemoryInfo_v2``; their v1 ``used`` includes the memory
  the driver reserves for itself;
* once a GPU is lost, every call on it raises ``NVMLError_GpuIsLost``.

Each call is counted in :attr:`FakeNvml.calls` by its pynvml name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml as _real

MiB = 1024**2

#: NVML_VALUE_NOT_AVAILABLE for an unsigned long long (what the raw struct holds)
NOT_AVAILABLE_U64 = 2**64 - 1


# -- drivers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Driver:
    """What one NVIDIA driver release offers, as far as the telemetry source cares."""

    version: str
    nvml_version: str
    cuda_version: int
    #: which nvmlDeviceGetComputeRunningProcesses C functions exist: "v1", "v2", "v3"
    process_calls: frozenset[str]
    #: nvmlDeviceGetMemoryInfo_v2 exists (drivers >= 510.39)
    memory_v2: bool


# R418: Kepler/Maxwell/Pascal era, only the v1 process call
DRIVER_418 = Driver("418.226.00", "10.418.226.00", 10010, frozenset({"v1"}), memory_v2=False)
# R470: last branch for Tesla K80; has _v2 (since 450.66) but not _v3 (since 510.39)
DRIVER_470 = Driver("470.256.02", "11.470.256.02", 11040, frozenset({"v1", "v2"}), False)
DRIVER_535 = Driver("535.183.01", "12.535.183.01", 12020, frozenset({"v1", "v2", "v3"}), True)
DRIVER_550 = Driver("550.54.15", "12.550.54.15", 12040, frozenset({"v1", "v2", "v3"}), True)
DRIVER_570 = Driver("570.124.06", "12.570.124.06", 12080, frozenset({"v1", "v2", "v3"}), True)


# -- devices --------------------------------------------------------------------------------


@dataclass
class FakeProcess:
    pid: int
    #: bytes; ``None`` or :data:`NOT_AVAILABLE_U64` when the driver cannot tell
    usedGpuMemory: int | None  # pynvml's name
    #: SM utilisation in the driver's per-process samples; ``None``: no sample for it
    smUtil: int | None = None


@dataclass
class FakeGpu:
    name: str
    uuid: str
    memory_total: int
    #: what nvidia-smi shows as used (v2 ``used``)
    memory_used: int = 0
    #: what the driver keeps for itself; v1 counts it as used on drivers >= 510
    memory_reserved: int = 0
    utilization: int = 0
    power_mw: int = 0
    energy_mj: int = 0
    processes: list[FakeProcess] = field(default_factory=list)
    #: pynvml function name -> the error that call raises on this device
    errors: dict[str, BaseException] = field(default_factory=dict)
    #: set to True mid-test to make the GPU fall off the bus
    lost: bool = False
    #: False: NVML refuses a handle (a GPU of the host that cgroups hide from us)
    accessible: bool = True
    #: MIG devices on this GPU (MIG-<uuid>, the R470+ form)
    mig_uuids: list[str] = field(default_factory=list)


def _merge(values: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Preset values updated by a test's; ``errors`` are added to the preset's own."""
    errors = {**values.get("errors", {}), **overrides.pop("errors", {})}
    values.update(overrides, errors=errors)


def not_supported() -> BaseException:
    err: BaseException = _real.NVMLError_NotSupported()
    return err


def a100_80gb(uuid: str = "GPU-3f1c6a2e-8d4b-4c0e-9a51-2b7e0d9c4f11", **kw: Any) -> FakeGpu:
    values: dict[str, Any] = dict(
        memory_used=61203267584,
        memory_reserved=566 * MiB,
        utilization=97,
        power_mw=391200,
        energy_mj=256172500,
        processes=[FakeProcess(48448, 58368 * MiB)],
    )
    _merge(values, kw)
    return FakeGpu("NVIDIA A100-SXM4-80GB", uuid, 85899345920, **values)


def h100_80gb(uuid: str = "GPU-b2e7d1a4-6c39-4f80-a2d5-91e3c07b6d48", **kw: Any) -> FakeGpu:
    values: dict[str, Any] = dict(
        memory_used=42949672960,
        memory_reserved=512 * MiB,
        utilization=64,
        power_mw=512345,
        energy_mj=1048576000,
        processes=[FakeProcess(2211, 40960 * MiB)],
    )
    _merge(values, kw)
    return FakeGpu("NVIDIA H100 80GB HBM3", uuid, 85520809984, **values)


def tesla_t4(uuid: str = "GPU-5a0c3e77-19d2-b46f-8e01-7d4c2fa9e336", **kw: Any) -> FakeGpu:
    values: dict[str, Any] = dict(
        memory_used=3 * 1024 * MiB,
        memory_reserved=256 * MiB,
        utilization=35,
        power_mw=27845,
        energy_mj=81234567,
        processes=[FakeProcess(3071, 3 * 1024 * MiB)],
    )
    _merge(values, kw)
    return FakeGpu("Tesla T4", uuid, 16106127360, **values)


def tesla_k80(uuid: str = "GPU-e81f4b90-2c7a-1d35-f6b8-0a94c3d2e517", **kw: Any) -> FakeGpu:
    """Kepler: no total energy counter (that is Volta and newer)."""
    values: dict[str, Any] = dict(
        memory_used=2048 * MiB,
        utilization=12,
        power_mw=58000,
        processes=[FakeProcess(901, 2048 * MiB)],
        errors={"nvmlDeviceGetTotalEnergyConsumption": not_supported()},
    )
    _merge(values, kw)
    return FakeGpu("Tesla K80", uuid, 11996954624, **values)


def tesla_p100(uuid: str = "GPU-7c2d9e15-3ab4-8f60-d1c7-52e0b9a4f6d3", **kw: Any) -> FakeGpu:
    """Pascal: no total energy counter either."""
    values: dict[str, Any] = dict(
        memory_used=8192 * MiB,
        utilization=88,
        power_mw=201500,
        processes=[FakeProcess(777, 8192 * MiB)],
        errors={"nvmlDeviceGetTotalEnergyConsumption": not_supported()},
    )
    _merge(values, kw)
    return FakeGpu("Tesla P100-PCIE-16GB", uuid, 17071734784, **values)


# -- handles --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeHandle:
    index: int


@dataclass(frozen=True)
class FakeMigHandle:
    parent: int
    uuid: str


# -- the module -----------------------------------------------------------------------------


class FakeNvml:
    """Looks like the ``pynvml`` module to the code under test."""

    # the real error classes and constants
    NVMLError = _real.NVMLError
    NVMLLibraryMismatchError = _real.NVMLLibraryMismatchError
    NVML_VALUE_NOT_AVAILABLE_ulonglong = _real.NVML_VALUE_NOT_AVAILABLE_ulonglong

    def __init__(
        self,
        gpus: list[FakeGpu],
        driver: Driver = DRIVER_550,
        *,
        init_error: BaseException | None = None,
        binding: str = "13.x",
        shutdown_error: BaseException | None = None,
    ) -> None:
        for name in dir(_real):
            if name.startswith(("NVMLError_", "NVML_ERROR_")):
                setattr(self, name, getattr(_real, name))
        self.gpus = gpus
        self.driver = driver
        self.init_error = init_error
        self.shutdown_error = shutdown_error
        self.binding = binding
        self.calls: Counter[str] = Counter()
        self.refcount = 0
        if binding != "11.450":
            # nvidia-ml-py >= 11.510 has these; 11.450 does not
            self.nvmlMemory_v2 = _real.nvmlMemory_v2
            self.nvmlDeviceGetComputeRunningProcesses_v3 = self._compute_processes_v3

    # -- plumbing --

    def _count(self, name: str) -> None:
        self.calls[name] += 1
        if self.refcount == 0 and name not in ("nvmlInit", "nvmlShutdown"):
            raise _real.NVMLError_Uninitialized()

    def _gpu(self, name: str, handle: Any) -> FakeGpu:
        """Count the call ``name``, then answer as the device would."""
        self._count(name)
        return self._device(handle, name)

    def _device(self, handle: Any, errors_key: str) -> FakeGpu:
        gpu: FakeGpu = self.gpus[handle.index]
        if gpu.lost:
            raise _real.NVMLError_GpuIsLost()
        err = gpu.errors.get(errors_key)
        if err is not None:
            raise err
        return gpu

    # -- system --

    def nvmlInit(self) -> None:
        self._count("nvmlInit")
        if self.init_error is not None:
            raise self.init_error
        self.refcount += 1

    def nvmlShutdown(self) -> None:
        self._count("nvmlShutdown")
        if self.shutdown_error is not None:
            raise self.shutdown_error
        if self.refcount == 0:
            raise _real.NVMLError_Uninitialized()
        self.refcount -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._count("nvmlSystemGetDriverVersion")
        return self.driver.version

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._count("nvmlSystemGetNVMLVersion")
        return self.driver.nvml_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._count("nvmlSystemGetCudaDriverVersion")
        return self.driver.cuda_version

    # -- enumeration --

    def nvmlDeviceGetCount(self) -> int:
        self._count("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._count("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise _real.NVMLError_InvalidArgument()
        gpu = self.gpus[index]
        if not gpu.accessible:
            raise _real.NVMLError_NoPermission()
        if gpu.lost:
            raise _real.NVMLError_GpuIsLost()
        return FakeHandle(index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeHandle | FakeMigHandle:
        self._count("nvmlDeviceGetHandleByUUID")
        for i, gpu in enumerate(self.gpus):
            if gpu.uuid == uuid:
                return FakeHandle(i)
            if uuid in gpu.mig_uuids:
                return FakeMigHandle(i, uuid)
        raise _real.NVMLError_NotFound()

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, mig: FakeMigHandle) -> FakeHandle:
        self._count("nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
        if not isinstance(mig, FakeMigHandle):
            raise _real.NVMLError_InvalidArgument()
        return FakeHandle(mig.parent)

    def nvmlDeviceGetIndex(self, handle: FakeHandle) -> int:
        self._gpu("nvmlDeviceGetIndex", handle)
        return handle.index

    # -- static fields --

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        return self._gpu("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        return self._gpu("nvmlDeviceGetUUID", handle).uuid

    # -- dynamic fields --

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version: int | None = None) -> Any:
        if version:
            self._count("nvmlDeviceGetMemoryInfo_v2")
            if not self.driver.memory_v2:
                raise _real.NVMLError_FunctionNotFound()
            gpu = self._device(handle, "nvmlDeviceGetMemoryInfo")
            return _real.c_nvmlMemory_v2_t(
                version=version,
                total=gpu.memory_total,
                reserved=gpu.memory_reserved,
                free=gpu.memory_total - gpu.memory_used - gpu.memory_reserved,
                used=gpu.memory_used,
            )
        gpu = self._gpu("nvmlDeviceGetMemoryInfo", handle)
        used = gpu.memory_used + (gpu.memory_reserved if self.driver.memory_v2 else 0)
        return _real.c_nvmlMemory_t(total=gpu.memory_total, free=gpu.memory_total - used, used=used)

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> Any:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        return _real.c_nvmlUtilization_t(gpu=gpu.utilization, memory=gpu.utilization // 2)

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetPowerUsage", handle).power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetTotalEnergyConsumption", handle).energy_mj

    # -- running processes --

    def _processes(
        self, version: str, handle: FakeHandle, counted_as: str | None = None
    ) -> list[SimpleNamespace]:
        """The C call ``version``; errors set for "nvmlDeviceGetComputeRunningProcesses"
        apply to every version."""
        name = "nvmlDeviceGetComputeRunningProcesses" + ("" if version == "v1" else f"_{version}")
        self.calls[counted_as or name] += 1
        if self.refcount == 0:
            raise _real.NVMLError_Uninitialized()
        if version not in self.driver.process_calls:
            # pynvml._nvmlGetFunctionPointer: raised before the device is touched
            raise _real.NVMLError_FunctionNotFound()
        gpu = self._device(handle, "nvmlDeviceGetComputeRunningProcesses")
        return [
            SimpleNamespace(pid=p.pid, usedGpuMemory=p.usedGpuMemory, gpuInstanceId=0xFFFFFFFF)
            for p in gpu.processes
        ]

    def nvmlDeviceGetProcessUtilization(
        self, handle: FakeHandle, last_seen_timestamp: int
    ) -> list[SimpleNamespace]:
        """As an H100 answers (``tests/data/h100``): a new sample names only the process
        that dominated it, plus any process set at 0 % (an idle holder shown at 0 %);
        NOT_FOUND when no process has a sample. ``nvml_replay`` replays the recordings."""
        self._count("nvmlDeviceGetProcessUtilization")
        gpu = self._device(handle, "nvmlDeviceGetProcessUtilization")
        stamp = last_seen_timestamp + 1_000_000
        sampled = [p for p in gpu.processes if p.smUtil is not None]
        if not sampled:
            raise _real.NVMLError_NotFound()
        dominant = max(sampled, key=lambda p: p.smUtil or 0)
        return [
            SimpleNamespace(pid=p.pid, timeStamp=stamp, smUtil=p.smUtil, memUtil=0)
            for p in sampled
            if p is dominant or p.smUtil == 0
        ]

    def _compute_processes_v3(self, handle: FakeHandle) -> list[SimpleNamespace]:
        return self._processes("v3", handle)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: FakeHandle) -> list[SimpleNamespace]:
        return self._processes("v2", handle)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[SimpleNamespace]:
        if self.binding == "11.450":
            return self._processes("v1", handle)
        # nvidia-ml-py >= 11.510: an alias of _v3 behind @throwOnVersionMismatch
        try:
            return self._processes("v3", handle, counted_as="nvmlDeviceGetComputeRunningProcesses")
        except _real.NVMLError_FunctionNotFound:
            raise _real.NVMLLibraryMismatchError(
                "Unversioned function called and the pyNVML version does not match the NVML "
                "lib version."
            ) from None
