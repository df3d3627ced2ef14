"""The VM part of a pod on a node whose GPUs are attached to a VM (GKE's N1 node pools
with T4, V100, P100 or P4), priced as GCP bills the node: its machine type, plus each GPU.

A node's GPU count is not in its machine type (``n1-standard-8`` carries 0 to 4 T4s), so
the hub shares the VM the way it shares a whole instance (:mod:`~.gpus`: the pod's GPUs
over the node's), taking the node's GPUs to be the pod's own: a pod with whole GPUs pays
its GPUs and the whole VM; a pod on a time-sliced GPU (1/N of it) pays 1/N of the GPU
and 1/N of the VM. That is exact for the usual one-pod-per-GPU-node pool and the most its
share can be on a node with more GPUs; the source says so.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import ceil

from ...core.attached_gpus import VmPricing, VmRow, vm_pricing
from ...core.catalog import PricePolicy
from ..allocation import ceil_micro
from ..model import Rate


def node_vm(rows: Sequence[VmRow], policy: PricePolicy, machine_type: str) -> VmPricing | None:
    """The VM row of a node's machine type at the hub's provider, market and region (a spot
    VM without a spot row: its on-demand row; a region without a row, or none known: the
    dearest region's; each the most it can cost); ``None``: not a VM with attached GPUs."""
    return vm_pricing(
        rows,
        provider=policy.provider,
        machine_type=machine_type,
        market=policy.market,
        region=policy.region,
    )


def with_vm(rate: Rate, vm: VmPricing, where: str) -> Rate:
    """``rate`` (the pod's GPUs, each at its accelerator's price) plus its part of the VM:
    each device carries (its share of a GPU) × VM / (the pod's whole GPUs, at least 1)."""
    allocation = rate.allocation
    share = allocation.share
    gpus = max(1, ceil(allocation.count * share))
    per_device = rate.usd_per_gpu_hour + ceil_micro(Fraction(vm.per_hour) * share / gpus)
    row = vm.row
    date = f"as of {row.as_of}" if row.as_of else "undated"
    bound = "upper bound: " if vm.upper_bound else ""
    source = (
        f"{rate.source}; plus the VM {row.machine_type} ({where}): {bound}{row.per_hour} "
        f"{row.currency}/h ({row.provider} {row.market} {row.region}, {date}), shared by the "
        f"pod's {gpus} GPU(s) (a node's GPU count is not in its machine type: the pod pays "
        "the whole VM, the most its share can be)"
    )
    if row.source:
        source += f"; source: {row.source}"
    return Rate(allocation, per_device, source)
