"""The extension's route table: every area's routes, in one list.

``GpuCost.initialize_handlers`` registers it; jupyter_server prepends the base URL. Each
handler module imports only the base handler (:mod:`jupyter_gpucost.server.web`), so the
HTTP layer has no import cycle: ``web`` ← ``handlers``, ``gpu_use.handlers``, ``budget.handlers``,
``export.handlers``, ``notify.handlers``, ``agents.handlers`` ← ``routes`` ← ``app``.
"""

from __future__ import annotations

from .agents.handlers import agent_handlers
from .budget.handlers import budget_handlers
from .export.handlers import export_handlers
from .gpu_use.handlers import probe_handlers
from .handlers import cost_handlers
from .notify.handlers import alert_handlers
from .web import Route


def route_table() -> list[Route]:
    """Every route of the extension; each is authenticated (a user's, or a kernel's token
    where the route opens a method to kernels)."""
    routes = [*cost_handlers(), *probe_handlers(), *budget_handlers(), *export_handlers()]
    return [*routes, *alert_handlers(), *agent_handlers()]
