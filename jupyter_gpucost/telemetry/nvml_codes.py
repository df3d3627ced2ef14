"""What NVML's answers mean: return codes, start-up failures in words, versioned calls.

Shared by the NVML source (:mod:`.nvml`), its field reads (:mod:`.nvml_calls`) and its
choice of visible GPUs (:mod:`.nvml_visibility`). Nothing here calls NVML.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from ..core.i18n import N_

#: the ``pynvml`` module, or a stand-in with the same names; the binding has no type
#: information, so its module and its device handles stay untyped
Nvml: TypeAlias = Any
#: an NVML device handle (a ctypes pointer in ``pynvml``)
Handle: TypeAlias = Any

# NVML return codes (nvml.h). They are ABI and never change; the binding's own constants
# are preferred when it has them (see ``error_code``).
ERR_NO_PERMISSION = 4
ERR_NOT_SUPPORTED = 3
ERR_NOT_FOUND = 6
ERR_DRIVER_NOT_LOADED = 9
ERR_LIBRARY_NOT_FOUND = 12
ERR_FUNCTION_NOT_FOUND = 13
ERR_GPU_IS_LOST = 15
ERR_RESET_REQUIRED = 16
ERR_OPERATING_SYSTEM = 17
ERR_LIB_RM_VERSION_MISMATCH = 18
ERR_UNKNOWN = 999

#: ``usedGpuMemory`` when the driver cannot tell (Windows WDDM, some vGPU and MIG setups):
#: NVML_VALUE_NOT_AVAILABLE as an unsigned long long.
VALUE_NOT_AVAILABLE_U64 = 2**64 - 1

INIT_REASONS: dict[int, str] = {
    ERR_LIBRARY_NOT_FOUND: N_("libnvidia-ml.so not found: no NVIDIA driver on this machine"),
    ERR_DRIVER_NOT_LOADED: N_("NVIDIA driver is not loaded"),
    ERR_NO_PERMISSION: N_(
        "no permission to use the NVIDIA driver "
        "(the server's user cannot open /dev/nvidiactl or /dev/nvidia*)"
    ),
    ERR_LIB_RM_VERSION_MISMATCH: N_(
        "the NVIDIA driver and libnvidia-ml.so are different versions "
        "(driver upgraded without a reboot, or a container with a mismatched library)"
    ),
    ERR_GPU_IS_LOST: N_("a GPU is lost (it fell off the bus); the machine needs a GPU reset"),
    ERR_RESET_REQUIRED: N_("a GPU needs a reset before NVML can use it"),
    ERR_OPERATING_SYSTEM: N_("the operating system blocked NVML"),
    ERR_UNKNOWN: N_("NVML failed to start: unknown error"),
}

#: the reading's fields that change from one read to the next
DYNAMIC_FIELDS = ("utilization_pct", "memory_used_bytes", "power_w", "energy_j", "processes")

#: running-process calls, newest first; the unversioned one is the v1 path with bindings
#: older than nvidia-ml-py 11.510 (newer bindings alias it to _v3 and raise
#: NVMLLibraryMismatchError when the driver lacks _v3)
PROCESS_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)


class GpuLost(Exception):
    """NVML answered NVML_ERROR_GPU_IS_LOST for a device."""


class NotInDriver(Exception):
    """No version of a versioned call exists in this driver/binding pair."""


def text(value: object) -> str:
    """NVML strings are ``bytes`` with old bindings and ``str`` with new ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def error_code(err: BaseException) -> int | None:
    """The NVML return code an ``NVMLError`` carries, if any."""
    value = getattr(err, "value", None)
    return value if isinstance(value, int) else None


def version(nvml: Nvml, call: str) -> str:
    """A version string NVML reports (driver, NVML), or ``"unknown"``."""
    try:
        return text(getattr(nvml, call)())
    except Exception:
        return "unknown"


def cuda_driver_version(nvml: Nvml) -> str | None:
    """The newest CUDA the driver supports, e.g. 12040 -> "12.4"."""
    try:
        number = int(nvml.nvmlSystemGetCudaDriverVersion())
    except Exception:
        return None
    return f"{number // 1000}.{number % 1000 // 10}"
