"""MIG slices and shared GPUs: what fraction of one GPU a pod's device is.

* A MIG device (``nvidia.com/mig-1g.5gb``, the device plugin's *mixed* strategy; or
  ``nvidia.com/gpu`` on a node whose ``nvidia.com/gpu.product`` ends in ``-MIG-1g.5gb``,
  the *single* strategy) is its profile's compute slices of its parent GPU: ``1g`` is 1/7
  of an A100, H100, H200 or B200 and 1/4 of an A30. The tables are NVIDIA's ("Supported
  MIG Profiles", MIG user guide, docs.nvidia.com/datacenter/tesla/mig-user-guide); a
  profile name belongs to one GPU's table except where two GPUs share names (A100-80GB
  and H100-80GB: ``1g.10gb`` ...), where the GPU must be named by a node label.
* A time-sliced (or MPS-shared) GPU is 1/N of one, N the number of clients per GPU.

Fractions are exact (:class:`fractions.Fraction`); money is rounded once, by the caller.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

#: each GPU's MIG profiles (without the ``+me`` media extensions, priced the same) and
#: its compute slices
MIG_PROFILES: dict[str, tuple[int, tuple[str, ...]]] = {
    "A30": (4, ("1g.6gb", "2g.12gb", "4g.24gb")),
    "A100-40GB": (7, ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")),
    "A100-80GB": (7, ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    "H100-80GB": (7, ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    "H100-NVL": (7, ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")),
    "H200": (7, ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
    "B200": (7, ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb")),
}
MIG_RESOURCE = re.compile(r"nvidia\.com/mig-(\d+g\.\d+gb)(\+me)?")
#: GPU feature discovery's product label of a MIG node (single strategy)
_MIG_PRODUCT = re.compile(r"(.+)-MIG-(\d+g\.\d+gb)(\+me)?", re.IGNORECASE)


class MigError(ValueError):
    """A MIG profile that cannot be placed on a GPU (the message says why)."""


@dataclass(frozen=True)
class Slice:
    """A MIG profile on its parent GPU."""

    parent: str
    profile: str
    share: Fraction

    @property
    def label(self) -> str:
        return f"MIG {self.profile}"


def mig_profile(resource: str) -> str | None:
    """``1g.5gb`` for ``nvidia.com/mig-1g.5gb``; ``None`` for any other resource."""
    found = MIG_RESOURCE.fullmatch(resource)
    return found.group(1) if found else None


def split_product(value: str) -> tuple[str, str] | None:
    """``("NVIDIA-A100-SXM4-40GB", "1g.5gb")`` for a MIG node's product label."""
    found = _MIG_PRODUCT.fullmatch(value.strip())
    return (found.group(1), found.group(2).lower()) if found else None


def parents(profile: str) -> list[str]:
    """The GPUs whose MIG table has ``profile``."""
    return [gpu for gpu, (_, names) in MIG_PROFILES.items() if profile in names]


def mig_slice(profile: str, parent: str | None) -> Slice:
    """``profile`` on ``parent`` (or on the one GPU whose table has it)."""
    owners = parents(profile)
    if parent is None:
        if not owners:
            raise MigError(f"MIG {profile} is in no MIG profile table the hub knows")
        if len(owners) > 1:
            raise MigError(
                f"MIG {profile} is a slice of {' or '.join(owners)}: name the GPU with a node "
                "selector (nvidia.com/gpu.product or cloud.google.com/gke-accelerator)"
            )
        parent = owners[0]
    if parent not in MIG_PROFILES:
        raise MigError(f"{parent} has no MIG profiles")
    slices, names = MIG_PROFILES[parent]
    if profile not in names:
        raise MigError(f"MIG {profile} is not a profile of {parent} ({', '.join(names)})")
    compute = int(profile.split("g.", 1)[0])
    return Slice(parent, profile, Fraction(compute, slices))
