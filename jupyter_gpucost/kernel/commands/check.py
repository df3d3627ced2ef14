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

from ...core.i18n import _
from ...core.wording import columns, pad


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
        facts.torch_error = _("import torch failed: {error}").format(error=e)
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
        facts.torch_error = _("torch.cuda.is_available() failed: {error}").format(error=e)
        return
    if facts.cuda_available:
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            facts.torch_gpus.append((torch.cuda.get_device_name(i), (int(major), int(minor))))


def _driver_facts(facts: Facts) -> None:
    from ..cell.measure import nvml

    source = nvml().source
    if source is not None:
        detail = source.status().detail
        facts.driver_version = detail.get("driver_version")
        facts.driver_cuda = detail.get("cuda_driver_version")
        facts.driver_gpus = [r.name for r in source.read()]
        facts.driver_how = "NVML"
        return
    reason = nvml().reason or _("NVML is not available")
    smi = shutil.which("nvidia-smi")
    if smi is None:
        facts.driver_how = _("{reason}; nvidia-smi not found").format(reason=reason)
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
        facts.driver_how = _("{reason}; nvidia-smi failed: {error}").format(reason=reason, error=e)
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
            notes.append(_("torch not installed: nothing to match against the GPUs"))
        return warn, notes
    if facts.torch_hip:
        text = _("torch is a ROCm (HIP {hip}) build: the NVIDIA checks skip it")
        notes.append(text.format(hip=facts.torch_hip))
        return warn, notes
    version = facts.torch_version
    if facts.torch_cuda is None:
        if gpu_count:
            text = _(
                "torch {version} is a CPU-only build, but this machine has {n} NVIDIA GPU(s): "
                "cells run on the CPU. Install a CUDA build "
                "(https://pytorch.org/get-started/locally/)."
            )
            warn.append(text.format(version=version, n=gpu_count))
        else:
            text = _("torch {version} is a CPU-only build (and no GPU here)")
            notes.append(text.format(version=version))
        return warn, notes
    built = _version(facts.torch_cuda)
    supports = _version(facts.driver_cuda)
    figures = {
        "cuda": facts.torch_cuda,
        "driver": facts.driver_version,
        "driver_cuda": facts.driver_cuda,
        "how": facts.driver_how,
    }
    if facts.driver_version is None and facts.driver_cuda is None:
        text = _(
            "torch is built with CUDA {cuda}, but no NVIDIA driver was found ({how}): cells "
            "run on the CPU"
        )
        warn.append(text.format(**figures))
    elif built and supports:
        if built[0] > supports[0]:
            text = _(
                "torch is built with CUDA {cuda}, but the driver {driver} supports CUDA up to "
                "{driver_cuda}: CUDA cannot start. Update the NVIDIA driver, or install a "
                "torch built for CUDA {major}.x."
            )
            warn.append(text.format(major=supports[0], **figures))
        elif built > supports:
            text = _(
                "torch is built with CUDA {cuda}, newer than the CUDA {driver_cuda} the "
                "driver {driver} supports: it runs through CUDA minor-version compatibility, "
                "but code that needs a newer driver (PTX compiled at run time, some new "
                "features) fails with 'unsupported toolchain' errors. Updating the driver "
                "removes the risk."
            )
            warn.append(text.format(**figures))
    if gpu_count and not facts.cuda_available:
        text = _(
            "torch.cuda.is_available() is False although the driver lists {n} GPU(s): check "
            "CUDA_VISIBLE_DEVICES and the driver"
        )
        warn.append(text.format(n=gpu_count))
    for i, (name, capability) in enumerate(facts.torch_gpus):
        runs = _runs_on(capability, facts.arch_list) if facts.arch_list else "native"
        sm = f"sm_{capability[0]}{capability[1]}"
        if runs == "no":
            text = _(
                "GPU {i} ({name}, {sm}) is not among the architectures this torch was built "
                "for ({archs}): expect 'no kernel image is available'. Install a torch build "
                "that supports it."
            )
            warn.append(text.format(i=i, name=name, sm=sm, archs=" ".join(facts.arch_list)))
        elif runs == "ptx":
            text = _("GPU {i} ({name}, {sm}) runs PTX compiled at first use (slow first start)")
            notes.append(text.format(i=i, name=name, sm=sm))
    if facts.cudnn is None and facts.cuda_available:
        notes.append(_("cuDNN is not available to torch: convolutions are slower"))
    return warn, notes


def report(facts: Facts) -> str:
    rows: list[tuple[str, str]] = []
    if facts.torch_version is None:
        rows.append(("torch", facts.torch_error or _("torch not installed")))
    else:
        rows.append(("torch", facts.torch_version))
        if facts.torch_hip:
            rows.append((_("built with"), f"ROCm/HIP {facts.torch_hip}"))
        else:
            built = f"CUDA {facts.torch_cuda}" if facts.torch_cuda else _("CPU only")
            rows.append((_("built with"), built))
        rows.append(("cuDNN", facts.cudnn or _("not available")))
        rows.append((_("CUDA available"), _("yes") if facts.cuda_available else _("no")))
    driver = _("NVIDIA driver")
    if facts.driver_version or facts.driver_cuda:
        text = _("{version}, supports CUDA up to {cuda} ({how})")
        rows.append(
            (
                driver,
                text.format(
                    version=facts.driver_version or _("unknown"),
                    cuda=facts.driver_cuda or _("unknown"),
                    how=facts.driver_how,
                ),
            )
        )
    else:
        rows.append((driver, _("not found: {how}").format(how=facts.driver_how)))
    if facts.torch_gpus:
        for i, (name, (major, minor)) in enumerate(facts.torch_gpus):
            text = _("{name}, compute capability {major}.{minor}")
            rows.append((f"GPU {i}", text.format(name=name, major=major, minor=minor)))
    elif facts.driver_gpus:
        for i, name in enumerate(facts.driver_gpus):
            text = _("{name} (seen by the driver, not by torch)")
            rows.append((f"GPU {i}", text.format(name=name)))
    else:
        rows.append(("GPUs", _("none")))
    warn, notes = findings(facts)
    width = max(columns(k) for k, _v in rows)
    out = ["%gpucost check"] + [f"  {pad(k, width)}  {v}" for k, v in rows]
    out += [_("warning: {text}").format(text=w) for w in warn]
    out += [_("note: {text}").format(text=n) for n in notes]
    if not warn:
        out.append(_("no mismatch found"))
    return "\n".join(out)


def run() -> str:
    return report(collect())


__all__ = ["Facts", "collect", "cudnn_text", "findings", "report", "run"]
