"""``%gpucost check``: does this kernel's PyTorch match the GPUs and the driver?

It reports torch's version, the CUDA runtime torch was built with, the NVIDIA driver and
the newest CUDA it supports (NVML, else ``nvidia-smi``), cuDNN, and each GPU's name and
compute capability; then says what does not match: a CPU-only build on a machine with
GPUs, a CUDA build newer than the driver supports, a GPU torch has no kernels for.
torch is imported only if it is installed (``importlib.util.find_spec``).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Facts:
    """What was found; ``None`` where it could not be known (and ``why`` says why)."""

    torch_version: str | None = None
    torch_cuda: str | None = None  # the CUDA runtime torch was built with
    torch_hip: str | None = None
    cuda_available: bool = False
    cudnn: str | None = None
    arch_list: list[str] = field(default_factory=list)
    #: (name, (major, minor)) of each GPU torch sees
    torch_gpus: list[tuple[str, tuple[int, int]]] = field(default_factory=list)
    driver_version: str | None = None
    driver_cuda: str | None = None  # the newest CUDA the driver supports
    driver_how: str = ""
    #: names of the GPUs the driver lists (NVML or nvidia-smi)
    driver_gpus: list[str] = field(default_factory=list)
    torch_error: str | None = None


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = re.findall(r"\d+", text)
    return tuple(int(p) for p in parts[:2]) if parts else None


def cudnn_text(version: int | None) -> str | None:
    """cuDNN's integer version as text: 90100 -> '9.1.0', 8902 -> '8.9.2'."""
    if not version:
        return None
    if version >= 10000:  # cuDNN 9 and later: major*10000 + minor*100 + patch
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def _torch_facts(facts: Facts) -> None:
    if importlib.util.find_spec("torch") is None:
        return
    try:
        import torch
    except Exception as e:  # installed but broken (missing libraries, ABI mismatch)
        facts.torch_error = f"import torch failed: {e}"
        return
    facts.torch_version = str(torch.__version__)
    facts.torch_cuda = getattr(torch.version, "cuda", None)
    facts.torch_hip = getattr(torch.version, "hip", None)
    # torch.backends.cudnn.version() has no annotations: read it as the untyped call it is
    cudnn: Any = torch.backends.cudnn
    try:
        facts.cudnn = cudnn_text(cudnn.version())
    except Exception:
        facts.cudnn = None
    try:
        facts.arch_list = list(torch.cuda.get_arch_list())
    except Exception:
        facts.arch_list = []
    try:
        facts.cuda_available = bool(torch.cuda.is_available())
    except Exception as e:
        facts.torch_error = f"torch.cuda.is_available() failed: {e}"
        return
    if facts.cuda_available:
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            facts.torch_gpus.append((torch.cuda.get_device_name(i), (int(major), int(minor))))


def _driver_facts(facts: Facts) -> None:
    from .measure import nvml

    source = nvml().source
    if source is not None:
        detail = source.status().detail
        facts.driver_version = detail.get("driver_version")
        facts.driver_cuda = detail.get("cuda_driver_version")
        facts.driver_gpus = [r.name for r in source.read()]
        facts.driver_how = "NVML"
        return
    reason = nvml().reason or "NVML is not available"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        facts.driver_how = f"{reason}; nvidia-smi not found"
        return
    try:
        out = subprocess.run([smi], capture_output=True, text=True, timeout=15, check=False).stdout
        names = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        facts.driver_how = f"{reason}; nvidia-smi failed: {e}"
        return
    driver = re.search(r"Driver Version:\s*([\d.]+)", out)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", out)
    facts.driver_version = driver.group(1) if driver else None
    facts.driver_cuda = cuda.group(1) if cuda else None
    facts.driver_gpus = [n.strip() for n in names.splitlines() if n.strip()]
    facts.driver_how = f"nvidia-smi ({reason})"


def collect() -> Facts:
    facts = Facts()
    _torch_facts(facts)
    _driver_facts(facts)
    return facts


def _runs_on(capability: tuple[int, int], arch_list: list[str]) -> str:
    """'native', 'ptx' (JIT-compiled at first use) or 'no' for a GPU of this capability."""
    major, minor = capability
    sm = [re.fullmatch(r"sm_(\d+)(\d)", a) for a in arch_list]
    compute = [re.fullmatch(r"compute_(\d+)(\d)", a) for a in arch_list]
    for m in sm:
        # cubins run on GPUs of the same major version and a later or equal minor one
        if m and int(m.group(1)) == major and int(m.group(2)) <= minor:
            return "native"
    for m in compute:
        if m and (int(m.group(1)), int(m.group(2))) <= (major, minor):
            return "ptx"
    return "no"


def findings(facts: Facts) -> tuple[list[str], list[str]]:
    """(warnings, notes) about how the pieces fit together."""
    warn: list[str] = []
    notes: list[str] = []
    gpu_count = max(len(facts.driver_gpus), len(facts.torch_gpus))
    if facts.torch_error:
        warn.append(facts.torch_error)
    if facts.torch_version is None:
        if not facts.torch_error:
            notes.append("torch not installed: nothing to match against the GPUs")
        return warn, notes
    if facts.torch_hip:
        notes.append(f"torch is a ROCm (HIP {facts.torch_hip}) build: the NVIDIA checks skip it")
        return warn, notes
    if facts.torch_cuda is None:
        if gpu_count:
            warn.append(
                f"torch {facts.torch_version} is a CPU-only build, but this machine has "
                f"{gpu_count} NVIDIA GPU(s): cells run on the CPU. Install a CUDA build "
                "(https://pytorch.org/get-started/locally/)."
            )
        else:
            notes.append(f"torch {facts.torch_version} is a CPU-only build (and no GPU here)")
        return warn, notes
    built = _version(facts.torch_cuda)
    supports = _version(facts.driver_cuda)
    if facts.driver_version is None and facts.driver_cuda is None:
        warn.append(
            f"torch is built with CUDA {facts.torch_cuda}, but no NVIDIA driver was found "
            f"({facts.driver_how}): cells run on the CPU"
        )
    elif built and supports:
        if built[0] > supports[0]:
            warn.append(
                f"torch is built with CUDA {facts.torch_cuda}, but the driver "
                f"{facts.driver_version} supports CUDA up to {facts.driver_cuda}: CUDA cannot "
                "start. Update the NVIDIA driver, or install a torch built for CUDA "
                f"{supports[0]}.x."
            )
        elif built > supports:
            warn.append(
                f"torch is built with CUDA {facts.torch_cuda}, newer than the CUDA "
                f"{facts.driver_cuda} the driver {facts.driver_version} supports: it runs "
                "through CUDA minor-version compatibility, but code that needs a newer driver "
                "(PTX compiled at run time, some new features) fails with 'unsupported "
                "toolchain' errors. Updating the driver removes the risk."
            )
    if gpu_count and not facts.cuda_available:
        warn.append(
            "torch.cuda.is_available() is False although the driver lists "
            f"{gpu_count} GPU(s): check CUDA_VISIBLE_DEVICES and the driver"
        )
    for i, (name, capability) in enumerate(facts.torch_gpus):
        runs = _runs_on(capability, facts.arch_list) if facts.arch_list else "native"
        sm = f"sm_{capability[0]}{capability[1]}"
        if runs == "no":
            warn.append(
                f"GPU {i} ({name}, {sm}) is not among the architectures this torch was "
                f"built for ({' '.join(facts.arch_list)}): expect 'no kernel image is "
                "available'. Install a torch build that supports it."
            )
        elif runs == "ptx":
            notes.append(
                f"GPU {i} ({name}, {sm}) runs PTX compiled at first use (slow first start)"
            )
    if facts.cudnn is None and facts.cuda_available:
        notes.append("cuDNN is not available to torch: convolutions are slower")
    return warn, notes


def report(facts: Facts) -> str:
    rows: list[tuple[str, str]] = []
    if facts.torch_version is None:
        rows.append(("torch", facts.torch_error or "torch not installed"))
    else:
        rows.append(("torch", facts.torch_version))
        if facts.torch_hip:
            rows.append(("built with", f"ROCm/HIP {facts.torch_hip}"))
        else:
            rows.append(
                ("built with", f"CUDA {facts.torch_cuda}" if facts.torch_cuda else "CPU only")
            )
        rows.append(("cuDNN", facts.cudnn or "not available"))
        rows.append(("CUDA available", "yes" if facts.cuda_available else "no"))
    if facts.driver_version or facts.driver_cuda:
        rows.append(
            (
                "NVIDIA driver",
                f"{facts.driver_version or 'unknown'}, supports CUDA up to "
                f"{facts.driver_cuda or 'unknown'} ({facts.driver_how})",
            )
        )
    else:
        rows.append(("NVIDIA driver", f"not found: {facts.driver_how}"))
    if facts.torch_gpus:
        for i, (name, (major, minor)) in enumerate(facts.torch_gpus):
            rows.append((f"GPU {i}", f"{name}, compute capability {major}.{minor}"))
    elif facts.driver_gpus:
        for i, name in enumerate(facts.driver_gpus):
            rows.append((f"GPU {i}", f"{name} (seen by the driver, not by torch)"))
    else:
        rows.append(("GPUs", "none"))
    warn, notes = findings(facts)
    width = max(len(k) for k, _ in rows)
    out = ["%gpucost check"] + [f"  {k:<{width}}  {v}" for k, v in rows]
    out += [f"warning: {w}" for w in warn]
    out += [f"note: {n}" for n in notes]
    if not warn:
        out.append("no mismatch found")
    return "\n".join(out)


def run() -> str:
    return report(collect())


__all__ = ["Facts", "collect", "cudnn_text", "findings", "report", "run"]
