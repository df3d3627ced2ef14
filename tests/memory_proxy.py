"""A JupyterHub proxy that keeps its routes in memory: no proxy process.

The hub tests that use only the Hub's and the services' APIs load it in their
``jupyterhub_config.py`` (``c.JupyterHub.proxy_class = MemoryProxy``).
"""

from __future__ import annotations

from typing import Any

from jupyterhub.proxy import Proxy  # type: ignore[import-untyped]


class MemoryProxy(Proxy):  # type: ignore[misc]
    """Routes kept in memory: no proxy process (only the APIs are used)."""

    should_start = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._routes: dict[str, dict[str, Any]] = {}

    async def add_route(self, routespec: str, target: str, data: dict[str, Any]) -> None:
        self._routes[routespec] = {"routespec": routespec, "target": target, "data": data}

    async def delete_route(self, routespec: str) -> None:
        self._routes.pop(routespec, None)

    async def get_all_routes(self) -> dict[str, dict[str, Any]]:
        return dict(self._routes)
