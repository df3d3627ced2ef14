"""Kubernetes node labels that name a GPU, mapped to the price catalog's models.

* ``cloud.google.com/gke-accelerator``: GKE's accelerator names (``nvidia-tesla-t4``,
  ``nvidia-l4``, ``nvidia-a100-80gb``, ``nvidia-h100-80gb`` ...);
* ``karpenter.k8s.aws/instance-gpu-name``: Karpenter's lower-case GPU names (``t4``,
  ``a10g``, ``l4``, ``l40s``, ``a100``, ``h100`` ...); ``a100`` is 40 or 80 GB, told apart
  by ``karpenter.k8s.aws/instance-gpu-memory`` (MiB) where the same settings name it;
* ``nvidia.com/gpu.product``: GPU feature discovery's product, the NVML name with ``-``
  for spaces (``Tesla-T4``, ``NVIDIA-A100-SXM4-80GB``); on a MIG node
  (``...-MIG-1g.5gb``) :mod:`~.gpus` splits off the parent GPU and bills the slice
  (:mod:`~.mig`); ``-SHARED`` (time-slicing) is billed as the whole GPU unless the
  sharing is known (``c.GpuCostHub.gpu_sharing``).

A value is looked up exactly (case aside): a label value the tables do not know is not
guessed, so a text a user typed can name a price only when it is a real label value.

Pure: no I/O.
"""

from __future__ import annotations

import re

from ...core.gpu_models import model_for

GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
KARPENTER_GPU = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
GFD_PRODUCT = "nvidia.com/gpu.product"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
#: the label older clusters still carry
INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
MODEL_LABELS = (GKE_ACCELERATOR, KARPENTER_GPU, GFD_PRODUCT)
INSTANCE_LABELS = (INSTANCE_TYPE, INSTANCE_TYPE_BETA)
GPU_RESOURCE = "nvidia.com/gpu"

#: GKE's ``--accelerator type=`` names (cloud.google.com/compute/docs/gpus)
GKE_MODELS = {
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100",
    "nvidia-tesla-p100": "P100",
    "nvidia-tesla-p4": "P4",
    "nvidia-tesla-a100": "A100-40GB",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-l4": "L4",
    "nvidia-h100-80gb": "H100-80GB",
    "nvidia-h100-mega-80gb": "H100-80GB",
    "nvidia-h200-141gb": "H200",
    "nvidia-b200": "B200",
}
#: Karpenter's ``instance-gpu-name`` values (from the EC2 API's GPU names, lower case)
KARPENTER_MODELS = {
    "t4": "T4",
    "t4g": "T4",
    "a10g": "A10G",
    "l4": "L4",
    "l40s": "L40S",
    "v100": "V100",
    "h100": "H100-80GB",
    "h200": "H200",
    "b200": "B200",
}
_A100_BY_MIB = {40960: "A100-40GB", 81920: "A100-80GB"}
_MIG = re.compile(r"-MIG-\d+g\.\d+gb", re.IGNORECASE)


class LabelError(ValueError):
    """A label value that names no catalog GPU (the message says why)."""


def model_from_label(key: str, value: object, gpu_memory_mib: object = None) -> str:
    """The catalog model a node label's value names; :class:`LabelError` otherwise."""
    if not isinstance(value, str) or not value or len(value) > 128:
        raise LabelError(f"{key}={_short(value)} is not a label value")
    folded = value.strip().lower()
    if key == GKE_ACCELERATOR:
        if folded in GKE_MODELS:
            return GKE_MODELS[folded]
        raise LabelError(f"{key}={value!r} is not a GKE accelerator the catalog prices")
    if key == KARPENTER_GPU:
        if folded == "a100":
            try:
                mib = int(str(gpu_memory_mib))
            except ValueError:
                mib = 0
            if mib in _A100_BY_MIB:
                return _A100_BY_MIB[mib]
            raise LabelError(
                f"{key}='a100' is 40 or 80 GB: add {KARPENTER_GPU_MEMORY} (40960 or 81920) "
                "to the same settings, or name the instance type"
            )
        if folded in KARPENTER_MODELS:
            return KARPENTER_MODELS[folded]
        raise LabelError(f"{key}={value!r} is not a Karpenter GPU name the catalog prices")
    if key == GFD_PRODUCT:
        if _MIG.search(value):
            raise LabelError(f"{key}={value!r} is a MIG slice: price it with profile_gpus")
        name = re.sub(r"-SHARED$", "", value.strip(), flags=re.IGNORECASE)
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", name):
            raise LabelError(f"{key}={value!r} is not a GPU product label")
        model = model_for(name.replace("-", " "))
        if model is None:
            raise LabelError(f"{key}={value!r} is not a GPU the catalog knows")
        return model
    raise LabelError(f"{key} does not name a GPU")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def gpu_count(value: object) -> int:
    """A resource quantity of whole GPUs (``1``, ``"2"``); :class:`LabelError` otherwise."""
    if isinstance(value, bool):
        raise LabelError(f"{value!r} is not a number of GPUs")
    if isinstance(value, int):
        count = value
    elif isinstance(value, str) and re.fullmatch(r"\s*\d{1,4}\s*", value):
        count = int(value)
    else:
        raise LabelError(f"{_short(value)} is not a whole number of GPUs")
    if not 0 <= count <= 1024:
        raise LabelError(f"{count} GPUs; a server has 0 to 1024")
    return count
