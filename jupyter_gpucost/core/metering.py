"""Whether this server meters a GPU at all: a state, not a cost of zero.

No GPU seen (no ``libnvidia-ml.so`` in a container, NVML listing no device, telemetry turned
off) does not mean the machine costs nothing: the cost is **unknown**, and a budget cannot
act on it. Where the machine is known and has a whole-instance price, it bills whether or
not NVML answers, so it is priced whole from that row instead. This module is the one rule;
the status document carries it (``metering``), the budget refuses with its sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .i18n import N_

#: ``gpus``: GPUs are metered; ``instance``: none seen, the machine priced whole from its
#: instance; ``unknown``: none seen and nothing to price the machine by
MeteringState = Literal["gpus", "instance", "unknown"]

#: why a budget cannot be set or act (the server's refusal, the panel's sentence)
NO_BUDGET = N_("no GPU is metered: a budget cannot act")
#: the reason when NVML started and lists no GPU this server may use
NO_GPU_LISTED = N_("NVML lists no GPU this server may use")


@dataclass(frozen=True)
class Metering:
    """What the session's cost stands on."""

    state: MeteringState
    #: why no GPU is metered, as a message of the catalog (``None`` with ``gpus``);
    #: translated where it is shown
    reason: str | None = None
    #: the instance priced whole (``instance`` only): ``p5.48xlarge``
    instance: str | None = None

    @property
    def budget_refusal(self) -> str | None:
        """The sentence a budget is refused with (``None``: a budget can act)."""
        return NO_BUDGET if self.state == "unknown" else None


def metering(
    gpus_seen: int,
    *,
    telemetry_reason: str | None,
    whole_instance: str | None,
) -> Metering:
    """The rule: a GPU seen is metered; else a known instance is priced whole; else unknown.

    ``whole_instance`` names the detected instance priced whole while no GPU is seen
    (``None``: there is none, or GPUs are seen).
    """
    if gpus_seen > 0:
        return Metering("gpus")
    reason = telemetry_reason or NO_GPU_LISTED
    if whole_instance:
        return Metering("instance", reason=reason, instance=whole_instance)
    return Metering("unknown", reason=reason)
