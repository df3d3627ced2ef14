"""The idle policy's settings of the hub service (``c.GpuCostHub.idle_policy``), as a
traits mixin of the app (``jupyter_gpucost.hub.app.GpuCostHub``)."""

from __future__ import annotations

from traitlets import Any as AnyTrait
from traitlets import HasTraits


class IdleTraits(HasTraits):
    idle_policy = AnyTrait(
        None,
        allow_none=True,
        help="Idle GPU servers reclaimed, per profile: {'gpu-large': {'after_min': 30, "
        "'warn_min': 5}, '*': {'after_min': 120, 'warn_min': 10}} ('*': every other server; "
        "None for a profile: never), or a callable(server) returning one rule or None. After "
        "after_min minutes with every GPU idle and no kernel busy the user is warned, then "
        "the server is stopped warn_min minutes later unless it became active. Optional "
        "busy_idle_max_min: how long a kernel the server reports busy spares GPUs the "
        "cluster's DCGM sees idle (default: always). None (the default): never reclaimed.",
    ).tag(config=True)
