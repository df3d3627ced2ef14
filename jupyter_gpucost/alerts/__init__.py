"""Alerts to the person in charge: one model for the single server and the hub.

* :mod:`.model`: what an alert says (its kind, who, which server, amounts, a link) and
  the generic webhook's JSON document (``schema`` ``gpucost.alert/v1``, docs/alerts.md);
* :mod:`.targets`: where alerts go (Apprise URLs and ``webhook(s)://``), checked at start
  and masked wherever they are shown;
* :mod:`.deliver`: one alert to one target, bounded in time;
* :mod:`.dispatch`: off the event loop, retried with backoff, at most once per event key
  (kind, user, subject and its period, threshold), each target paced (:mod:`.pacing`);
* :mod:`.memory`: the keys sent, each until the end of its period, across restarts.

Tornado-free: may import :mod:`jupyter_gpucost.core` only.
"""

from __future__ import annotations

from .dispatch import AlertDispatcher, Delivery, DispatchSettings
from .memory import FileKeys, SentKeys
from .model import Alert, AlertKind, budget_crossing, spend_spike, stopped
from .targets import Target, TargetError, mask, parse_targets

__all__ = [
    "Alert",
    "AlertDispatcher",
    "AlertKind",
    "Delivery",
    "DispatchSettings",
    "FileKeys",
    "SentKeys",
    "Target",
    "TargetError",
    "budget_crossing",
    "mask",
    "parse_targets",
    "spend_spike",
    "stopped",
]
