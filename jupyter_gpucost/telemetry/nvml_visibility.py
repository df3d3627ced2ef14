"""Which of the GPUs NVML sees this server may use: ``CUDA_VISIBLE_DEVICES``, else
``NVIDIA_VISIBLE_DEVICES``, read the way CUDA and the NVIDIA container runtime read them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..core.i18n import N_
from .nvml_calls import NvmlDevice
from .nvml_codes import Nvml

_INDEX_RE = re.compile(r"[+-]?\d+")
_MIG_INDEX_RE = re.compile(r"(\d+):(\d+)")


@dataclass
class VisibleGpus:
    """The GPUs chosen, in the order CUDA numbers them, and what the admin should know."""

    devices: list[NvmlDevice]
    #: status details (``visibility``, ``visible_devices``, ``device_order``, notes)
    detail: dict[str, str] = field(default_factory=dict)
    #: why no GPU is read at all, if so
    reason: str | None = None


def select_visible(
    devices: list[NvmlDevice], environ: Mapping[str, str], nvml: Nvml, log: logging.Logger
) -> VisibleGpus:
    """The GPUs of ``devices`` (every GPU NVML lists) that this server may use."""
    return _Selector(devices, nvml, log).select(environ)


class _Selector:
    def __init__(self, devices: list[NvmlDevice], nvml: Nvml, log: logging.Logger) -> None:
        self._devices = devices
        self._nvml = nvml
        self._log = log

    def select(self, env: Mapping[str, str]) -> VisibleGpus:
        devices = [d for d in self._devices if not d.inaccessible]
        notes: list[str] = []
        detail: dict[str, str] = {}
        reason: str | None = None
        if "CUDA_VISIBLE_DEVICES" in env:
            raw = env["CUDA_VISIBLE_DEVICES"]
            detail["visibility"] = f"CUDA_VISIBLE_DEVICES={raw}"
            visible = self._cuda_visible(raw, notes)
            if not visible and self._devices:
                reason = f"no GPU visible to this server: CUDA_VISIBLE_DEVICES={raw!r} names none"
        elif "NVIDIA_VISIBLE_DEVICES" in env:
            raw = env["NVIDIA_VISIBLE_DEVICES"]
            detail["visibility"] = f"NVIDIA_VISIBLE_DEVICES={raw}"
            visible = self._nvidia_visible(raw, devices, notes)
            if not visible and self._devices:
                reason = f"no GPU visible to this server: NVIDIA_VISIBLE_DEVICES={raw!r}"
        else:
            detail["visibility"] = "all GPUs (CUDA_VISIBLE_DEVICES is not set)"
            visible = devices
        if not self._devices:
            reason = N_("NVML found no GPU on this machine")
        hidden = [d.nvml_index for d in self._devices if d.inaccessible]
        if hidden:
            notes.append(
                "NVML index(es) "
                + ",".join(map(str, hidden))
                + " refused with 'Insufficient Permissions': GPUs of the host not given to "
                "this server"
            )
        detail["visible_devices"] = ",".join(str(d.nvml_index) for d in visible)
        order = env.get("CUDA_DEVICE_ORDER", "")
        if len(visible) > 1 and order != "PCI_BUS_ID":
            detail["device_order"] = (
                "GPU numbers and CUDA_VISIBLE_DEVICES indices are read in NVML (PCI bus) "
                "order; CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, "
                "so with GPUs of different models cuda:N may not be GPU N here"
            )
        if notes:
            detail["visibility_notes"] = "; ".join(notes)
            for note in notes:
                self._log.warning("NVML: %s", note)
        return VisibleGpus(devices=visible, detail=detail, reason=reason)

    def _cuda_visible(self, raw: str, notes: list[str]) -> list[NvmlDevice]:
        """CUDA's rules: listed order; the first invalid entry ends the list."""
        if not raw.strip():
            return []
        chosen: list[NvmlDevice] = []
        for entry in (e.strip() for e in raw.split(",")):
            dev: NvmlDevice | None
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

    def _nvidia_visible(
        self, raw: str, devices: list[NvmlDevice], notes: list[str]
    ) -> list[NvmlDevice]:
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
        chosen: list[NvmlDevice] = []
        for entry in entries:
            mig = _MIG_INDEX_RE.fullmatch(entry)
            dev: NvmlDevice | None
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

    def _match(self, entry: str) -> tuple[NvmlDevice | None, str]:
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

    def _mig_parent(self, entry: str) -> NvmlDevice | None:
        """The physical GPU of a MIG device (``MIG-<uuid>`` or ``MIG-GPU-<uuid>/gi/ci``)."""
        rest = entry[4:]
        if rest.upper().startswith("GPU-"):  # the pre-R470 form names its parent
            uuid = rest.split("/", 1)[0].lower()
            for dev in self._devices:
                if dev.uuid.lower() == uuid and not dev.inaccessible:
                    return dev
            return None
        nvml = self._nvml
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
