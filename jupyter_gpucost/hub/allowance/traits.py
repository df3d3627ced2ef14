"""The allowances' settings of the hub service (``c.GpuCostHub.user_allowances`` and the
rest), as a traits mixin of the app (``jupyter_gpucost.hub.app.GpuCostHub``); checked once
into frozen settings by :func:`.config.parse_settings`."""

from __future__ import annotations

from traitlets import Any as AnyTrait
from traitlets import Float, HasTraits, Int


class AllowanceTraits(HasTraits):
    user_allowances = AnyTrait(
        None,
        allow_none=True,
        help="Allowances by user ('*': everyone): {'*': {'gpu_hours': 1, 'per': 'week'}}, "
        "in 'usd' or 'gpu_hours', per 'day', 'week', 'month' or 'N days' (rolling); or a "
        "balance {'gpu_hours': 1, 'start': '2026-09-07', 'top_up': 1, 'every': 'week', "
        "'cap': 2} (docs/jupyterhub.md).",
    ).tag(config=True)
    group_allowances = AnyTrait(
        None,
        allow_none=True,
        help="Allowances by group, as user_allowances, on the members' pooled usage, or "
        "each member's own with 'per_member': True.",
    ).tag(config=True)
    gpu_hour_weights = AnyTrait(
        None,
        allow_none=True,
        help="What one GPU-hour of a model counts in a GPU-hour allowance: "
        "{'A100-80GB': 4, 'T4': 1} (a model not named: 1).",
    ).tag(config=True)
    allowance_min_runtime_s = Float(
        0.0,
        help="A spawn is refused when what is left of an allowance lasts less than this "
        "many seconds at the profile's rate, 0 to 604800.",
    ).tag(config=True)
    allowance_requests_per_week = Int(
        3,
        help="How many requests for more allowance one user may make in an ISO week "
        "(one may be open at a time), 0 to 100.",
    ).tag(config=True)
