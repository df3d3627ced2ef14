"""What happens at the budget: kernels interrupted or shut down, or the server stopped.

``stop-server`` under JupyterHub asks the hub to stop this server
(``DELETE {JUPYTERHUB_API_URL}/users/{name}/server`` with the server's own token, which
needs the ``delete:servers!user`` scope). The hub SIGTERMs this process while it handles
the request, so the answer may never come: the action is recorded *before* the request.
When the hub refuses (no scope: 403) or cannot be reached, the server shuts its kernels
down and stops itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

from jupyter_core.utils import ensure_async
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest


@dataclass(frozen=True)
class HubTarget:
    """How this server asks JupyterHub to stop it."""

    api_url: str
    token: str
    user: str
    server_name: str = ""

    @property
    def stop_url(self) -> str:
        base = self.api_url.rstrip("/")
        user = quote(self.user, safe="")
        if self.server_name:
            return f"{base}/users/{user}/servers/{quote(self.server_name, safe='')}"
        return f"{base}/users/{user}/server"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> HubTarget | None:
        api_url = environ.get("JUPYTERHUB_API_URL", "")
        token = environ.get("JUPYTERHUB_API_TOKEN", "") or environ.get("JPY_API_TOKEN", "")
        user = environ.get("JUPYTERHUB_USER", "")
        if not (api_url and token and user):
            return None
        return cls(api_url, token, user, environ.get("JUPYTERHUB_SERVER_NAME", ""))


class Kernel(Protocol):
    @property
    def execution_state(self) -> str: ...


class KernelManager(Protocol):
    """What the budget needs of jupyter_server's kernel manager."""

    def list_kernel_ids(self) -> list[str]: ...

    def get_kernel(self, kernel_id: str) -> Kernel: ...

    #: each may return an awaitable (jupyter_server's async kernel manager) or not
    def interrupt_kernel(self, kernel_id: str) -> object: ...

    def shutdown_kernel(self, kernel_id: str) -> object: ...


async def kernel_ids(kernel_manager: KernelManager) -> list[str]:
    return list(kernel_manager.list_kernel_ids())


def busy_kernels(kernel_manager: KernelManager) -> list[str]:
    """Ids of kernels that are executing now (never culled for being idle)."""
    busy = []
    for kid in list(kernel_manager.list_kernel_ids()):
        try:
            state = kernel_manager.get_kernel(kid).execution_state
        except KeyError:
            continue
        if state == "busy":
            busy.append(kid)
    return busy


async def interrupt_kernels(kernel_manager: KernelManager, log: logging.Logger) -> int:
    done = 0
    for kid in await kernel_ids(kernel_manager):
        try:
            await ensure_async(kernel_manager.interrupt_kernel(kid))
            done += 1
        except Exception as e:  # one kernel failing must not spare the others
            log.warning("jupyter-gpucost: could not interrupt kernel %s: %s", kid, e)
    return done


async def shutdown_kernels(kernel_manager: KernelManager, log: logging.Logger) -> int:
    done = 0
    for kid in await kernel_ids(kernel_manager):
        try:
            await ensure_async(kernel_manager.shutdown_kernel(kid))
            done += 1
        except Exception as e:
            log.warning("jupyter-gpucost: could not shut down kernel %s: %s", kid, e)
    return done


@dataclass(frozen=True)
class HubAnswer:
    ok: bool
    status: int | None
    message: str


async def ask_hub_to_stop(target: HubTarget, *, timeout_s: float = 10.0) -> HubAnswer:
    """Send the DELETE; 202/204 means the hub is stopping this server."""
    request = HTTPRequest(
        target.stop_url,
        method="DELETE",
        headers={"Authorization": f"token {target.token}"},
        request_timeout=timeout_s,
        connect_timeout=timeout_s,
    )
    try:
        response = await AsyncHTTPClient().fetch(request, raise_error=False)
    except (OSError, HTTPClientError) as e:
        return HubAnswer(False, None, f"JupyterHub could not be reached: {e}")
    if response.code in (202, 204):
        return HubAnswer(True, response.code, "JupyterHub is stopping the server")
    if response.code == 599:
        return HubAnswer(False, None, f"JupyterHub could not be reached: {response.error}")
    body = response.body.decode("utf-8", "replace")[:300] if response.body else ""
    hint = (
        " (the server's token needs the delete:servers!user scope: see docs/jupyterhub.md)"
        if response.code == 403
        else ""
    )
    return HubAnswer(False, response.code, f"JupyterHub answered {response.code}{hint}: {body}")
