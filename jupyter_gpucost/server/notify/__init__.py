"""Alerts from a single server (docs/alerts.md): the budget's threshold crossings, its stops
and idle warnings sent to ``c.GpuCost.notify`` and the user's own targets, through the
tornado-free :mod:`jupyter_gpucost.alerts`.

* :mod:`.alerter`: the budget's standings and events to alerts;
* :mod:`.user_targets`: the targets a user adds from the panel (a file of the server's);
* :mod:`.traits`: ``c.GpuCost.notify*``, read once by the app into :class:`.NotifySettings`;
* :mod:`.handlers`: the panel's routes (targets masked, a test).

May import: everything below it (the server's base, :mod:`..budget`, ...),
``jupyter_gpucost.alerts`` and ``.core``; its :mod:`.handlers` also the base handler
(:mod:`..web`). Never :mod:`..machine`, :mod:`..spot` or the app.
"""

from __future__ import annotations

from .alerter import NotifySettings, ServerAlerts, start_alerts

__all__ = ["NotifySettings", "ServerAlerts", "start_alerts"]
