"""The alerts' settings of ``c.GpuCost`` (docs/alerts.md), read once by the app into a
:class:`~.alerter.NotifySettings` (:mod:`..settings`)."""

from __future__ import annotations

from typing import Any

from traitlets import Bool, Float, HasTraits, Int, List, TraitError, Unicode, validate

from ...alerts.targets import TargetError, parse_targets
from ..traits import within


class AlertTraits(HasTraits):
    """Where the person in charge is alerted (docs/alerts.md). The URLs hold secrets: they
    are never logged nor shown (the panel lists them masked)."""

    notify = List(
        Unicode(),
        config=True,
        help="Where alerts about this server's spending go: Apprise URLs (mailtos://, "
        "slack://, msteams://, lark://, dingtalk://, wecombot://, ntfy:// ...) or "
        "webhook(s)://host/path for the generic JSON webhook. Users cannot read these.",
    )
    notify_thresholds_pct = List(
        Int(),
        [50, 80, 100],
        config=True,
        help="Percentages of a budget at which the targets are alerted, once each.",
    )
    notify_spike_factor = Float(
        3.0,
        config=True,
        help="Alert when today's spend is above this many times the median day (of the last "
        "14 days with spend, at least 3; needs the ledger), 0 (never) to 1000.",
    )
    notify_user_targets = Bool(
        True,
        config=True,
        help="Let the user add targets for their own alerts from the panel.",
    )
    notify_state_path = Unicode(
        "",
        config=True,
        help="The JSON file keeping the alerts already sent and the user's own targets. "
        "Empty: <Jupyter data dir>/gpucost/alerts.json.",
    )

    @validate("notify")
    def _check_notify(self, proposal: dict[str, Any]) -> list[str]:
        try:
            return [t.url for t in parse_targets(proposal["value"], "c.GpuCost.notify")]
        except TargetError as e:
            raise TraitError(str(e)) from None

    @validate("notify_spike_factor")
    def _check_spike_factor(self, proposal: dict[str, Any]) -> float:
        value = float(proposal["value"])
        within("notify_spike_factor", value, 0, 1000, "a number from 0 (never) to 1000")
        return value

    @validate("notify_thresholds_pct")
    def _check_notify_thresholds(self, proposal: dict[str, Any]) -> list[int]:
        values = [int(v) for v in proposal["value"]]
        if not values or any(not 1 <= v <= 1000 for v in values):
            raise TraitError(
                f"c.GpuCost.notify_thresholds_pct = {proposal['value']!r} is not valid: use "
                "whole percentages from 1 to 1000, such as [50, 80, 100]."
            )
        return sorted(set(values))
