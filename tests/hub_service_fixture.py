"""A real JupyterHub on loopback running the gpucost service as a hub-managed service.

One hub per test module (start-up 3–6 s, each spawn 4–6 s). The hub spawns
``jupyterhub-singleuser`` from this environment with simulated GPUs; the gpucost service is
started by the hub (``c.JupyterHub.services`` with a ``command``) with a role that has only
the scopes it needs. A driver service (admin scopes) plays the admin's part: it creates the
users, their groups and their tokens, and starts servers.

With ``proxy=True`` a real configurable-http-proxy routes the public URL (the browser
tests log in through the hub's login form); otherwise routes are kept in memory.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the least scopes the gpucost service needs from the Hub
SERVICE_SCOPES = ["list:users", "read:users:groups", "read:servers", "delete:servers"]
#: 2 simulated A100-80GB at the AWS on-demand price: $6.862 an hour, $0.0019 a second
USD_PER_S = 6.862 / 3600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chp_command() -> str | None:
    """configurable-http-proxy: $GPUCOST_CHP, ./node_modules/.bin, or on the PATH."""
    for candidate in (
        os.environ.get("GPUCOST_CHP", ""),
        str(ROOT / "node_modules" / ".bin" / "configurable-http-proxy"),
        shutil.which("configurable-http-proxy") or "",
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@dataclass
class Hub:
    api: str
    public: str
    service: str
    token: str
    service_token: str
    root: Path
    process: subprocess.Popen[bytes]
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def call(
        self,
        method: str,
        path: str,
        body: object = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        return http(method, f"{self.api}{path}", token or self.token, body, headers)

    def svc(
        self,
        method: str,
        path: str,
        token: str | None,
        body: object = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """Call the gpucost service directly (not through the proxy)."""
        return http(method, f"{self.service}{path}", token, body, headers)

    def server(self, user: str) -> dict[str, Any] | None:
        code, body = self.call("GET", f"/users/{user}")
        assert code == 200, body
        return body["servers"].get("")  # type: ignore[no-any-return]

    def token_for(self, user: str) -> str:
        if user not in self.tokens:
            code, body = self.call("POST", f"/users/{user}/tokens", {"note": "test"})
            assert code == 201, body
            self.tokens[user] = body["token"]
        return self.tokens[user]

    def wait(self, what: str, predicate: Callable[[], object], timeout_s: float) -> None:
        """Until ``predicate()`` holds; an exception in it counts as "not yet" (and is
        shown if time runs out)."""
        deadline = time.monotonic() + timeout_s
        last = "none"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the hub exited:\n{self.log.read_text()[-3000:]}")
            try:
                if predicate():
                    return
            except Exception as e:  # not yet: a slow answer on a busy machine, a 5xx
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.5)
        raise AssertionError(
            f"timed out after {timeout_s} s: {what} (last error: {last})\n"
            f"{self.log.read_text()[-5000:]}"
        )


def http(
    method: str,
    url: str,
    token: str | None,
    body: object = None,
    more_headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", **(more_headers or {})}
    if token:
        headers["Authorization"] = f"token {token}"
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    elif method in ("POST", "DELETE"):
        data = b""
    request = urllib.request.Request(url, method=method, headers=headers, data=data)
    try:
        # the Hub holds a spawn request up to its slow_spawn_timeout (10 s) before it
        # answers 202: the client waits longer than that, on a busy machine too
        with urllib.request.urlopen(request, timeout=60) as response:
            raw = response.read()
            kind = response.headers.get("Content-Type", "")
            return response.status, json.loads(raw) if raw and "json" in kind else raw.decode()
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode()


HUB_CONFIG = """
import sys
from jupyter_gpucost.hub.spawn_hook import refuse_over_budget

sys.path.insert(0, {tests!r})
from memory_proxy import MemoryProxy


c.JupyterHub.bind_url = "http://127.0.0.1:{public}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub}"
if {proxy!r}:
    c.ConfigurableHTTPProxy.command = [{proxy!r}]
    c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
    c.ConfigurableHTTPProxy.pid_file = "{root}/proxy.pid"
else:
    c.JupyterHub.proxy_class = MemoryProxy
c.JupyterHub.db_url = "sqlite:///{root}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{root}/cookie_secret"
c.JupyterHub.pid_file = "{root}/jupyterhub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{root}/home/{{username}}"
c.Spawner.cmd = ["{singleuser}"]
c.Spawner.args = [
    "--allow-root",
    "--GpuCost.telemetry=simulated",
    # no metadata service is ever asked, whatever machine runs the tests
    "--GpuCost.detect_machine=False",
    "--GpuCost.sample_interval_s=0.5",
    "--GpuCost.minimum_charge_s=0",
    "--GpuCost.hub_report_interval_s=1",
]
c.Spawner.environment = {{
    "GPUCOST_HUB_URL": "http://127.0.0.1:{svc}/services/gpucost/",
    # each user's own Jupyter config: alice's disables the extension
    "JUPYTER_CONFIG_DIR": lambda spawner: "{root}/config/" + spawner.user.name,
    "JUPYTER_DATA_DIR": lambda spawner: "{root}/data/" + spawner.user.name,
    "JUPYTER_RUNTIME_DIR": lambda spawner: "{root}/runtime/" + spawner.user.name,
}}
# each server's own token may report its user's spend (the user role grants it too: a
# token never has more than its owner)
c.Spawner.server_token_scopes = [
    "users:activity!user", "access:servers!server", "custom:gpucost:report!user"
]
c.Spawner.poll_interval = 1
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 60
c.Spawner.pre_spawn_hook = refuse_over_budget(
    "http://127.0.0.1:{svc}/services/gpucost/", "{service_token}"
)
c.JupyterHub.services = [
    {{"name": "test-driver", "api_token": "{token}"}},
    {{"name": "prometheus", "api_token": "{prometheus_token}"}},
    {{
        "name": "gpucost",
        "url": "http://127.0.0.1:{svc}",
        "api_token": "{service_token}",
        "command": [{python!r}, "-m", "jupyter_gpucost.hub", "--config", "{root}/gpucost_hub_config.py"],
        "cwd": "{root}",
        "environment": {{"PYTHONPATH": "{pythonpath}"}},
        "oauth_no_confirm": True,
        # the service's pages may learn whether a user holds its admin scope
        "oauth_client_allowed_scopes": ["custom:gpucost:admin"],
    }},
]
c.JupyterHub.custom_scopes = {{
    "custom:gpucost:admin": {{"description": "See every user's GPU spend in the gpucost service"}},
    "custom:gpucost:report": {{"description": "Report a server's GPU spend to the gpucost service"}},
}}
c.JupyterHub.load_roles = [
    {{
        "name": "driver",
        "scopes": ["admin:users", "admin:servers", "admin:groups", "tokens", "read:hub", "access:servers"],
        "services": ["test-driver"],
    }},
    {{"name": "gpucost-service", "scopes": {scopes!r}, "services": ["gpucost"]}},
    # a scraper of /metrics: an admin of the gpucost service, nothing else
    {{
        "name": "gpucost-metrics",
        "scopes": ["custom:gpucost:admin", "access:services!service=gpucost"],
        "services": ["prometheus"],
    }},
    # an admin of the gpucost service by a Hub role (the pages see it through OAuth)
    {{"name": "gpucost-admins", "scopes": ["custom:gpucost:admin"], "users": ["erin"]}},
    # users may open the service's pages
    {{
        "name": "user",
        "scopes": ["self", "access:services!service=gpucost", "custom:gpucost:report!user"],
    }},
]
"""

SERVICE_CONFIG = """
c.GpuCostHub.price_provider = "aws"
c.GpuCostHub.price_region = "us-east-1"
c.GpuCostHub.default_gpu = "A100-80GB x 2"
c.GpuCostHub.minimum_charge_s = 0
c.GpuCostHub.user_budgets = {budgets!r}
c.GpuCostHub.group_budgets = {group_budgets!r}
c.GpuCostHub.grace_s = 2
c.GpuCostHub.poll_interval_s = 1
c.GpuCostHub.flush_interval_s = {flush_s}
c.GpuCostHub.admin_groups = {{"finance"}}
c.GpuCostHub.data_dir = "{root}/gpucost-data"
c.GpuCostHub.log_level = "DEBUG"
"""

#: alice's own config: the extension is off in her server
NO_EXTENSION = 'c.ServerApp.jpserver_extensions = {"jupyter_gpucost": False}\n'


@contextmanager
def running_hub(
    root: Path,
    *,
    budgets: dict[str, dict[str, float]],
    flush_s: float = 2.0,
    proxy: bool = False,
    users: tuple[str, ...] = ("alice", "bob", "carol"),
    groups: dict[str, list[str]] | None = None,
    group_budgets: dict[str, dict[str, float]] | None = None,
    user_configs: dict[str, str] | None = None,
    service_extra: str = "",
    hub_extra: str = "",
    python: str = sys.executable,
) -> Iterator[Hub]:
    """A hub with ``users`` in ``groups`` (default: carol in finance, whose month budget
    is $1,000); each user's own Jupyter config from ``user_configs`` (default: alice's
    disables the extension); more lines for the service's and the Hub's config.

    ``python``: the environment the Hub, its servers and the service run from; another
    environment's runs its own installed jupyter_gpucost, never this tree's."""
    this_tree = python == sys.executable
    bin_dir = Path(python).parent
    groups = {"finance": ["carol"]} if groups is None else groups
    group_budgets = {"finance": {"month": 1000}} if group_budgets is None else group_budgets
    user_configs = {"alice": NO_EXTENSION} if user_configs is None else user_configs
    token, service_token = secrets.token_hex(16), secrets.token_hex(16)
    prometheus_token = secrets.token_hex(16)
    hub_port, svc_port, public = free_port(), free_port(), free_port()
    chp = chp_command() if proxy else None
    if proxy and chp is None:
        raise RuntimeError(
            "configurable-http-proxy not found: `npm install configurable-http-proxy` "
            "(or set GPUCOST_CHP to its path)"
        )
    for user, text in user_configs.items():
        (root / "config" / user).mkdir(parents=True)
        (root / "config" / user / "jupyter_server_config.py").write_text(text)
    (root / "gpucost_hub_config.py").write_text(
        textwrap.dedent(
            SERVICE_CONFIG.format(
                budgets=budgets,
                group_budgets=group_budgets,
                flush_s=flush_s,
                root=root,
            )
        )
        + service_extra
    )
    config = root / "jupyterhub_config.py"
    config.write_text(
        textwrap.dedent(
            HUB_CONFIG.format(
                tests=str(Path(__file__).parent),
                public=public,
                hub=hub_port,
                svc=svc_port,
                proxy=chp or "",
                proxy_api=free_port(),
                root=root,
                token=token,
                service_token=service_token,
                prometheus_token=prometheus_token,
                singleuser=bin_dir / "jupyterhub-singleuser",
                pythonpath=ROOT if this_tree else "",
                python=python,
                scopes=SERVICE_SCOPES,
            )
        )
        + hub_extra
    )
    log = root / "hub.log"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT) if this_tree else "",
        "CONFIGPROXY_AUTH_TOKEN": secrets.token_hex(16),
    }
    for name in ("GPUCOST_BUDGET_USD", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_API_URL"):
        env.pop(name, None)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [python, "-m", "jupyterhub", "-f", str(config)],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    hub = Hub(
        api=f"http://127.0.0.1:{hub_port}/hub/api",
        public=f"http://127.0.0.1:{public}",
        service=f"http://127.0.0.1:{svc_port}/services/gpucost/",
        token=token,
        service_token=service_token,
        root=root,
        process=process,
        log=log,
        tokens={"prometheus": prometheus_token},
    )

    def up() -> bool:
        try:
            return hub.call("GET", "/")[0] == 200 and hub.svc("GET", "api/me", None)[0] == 401
        except (urllib.error.URLError, ConnectionError):
            return False

    try:
        hub.wait("the hub and the gpucost service to start", up, 90)
        for user in users:
            code, body = hub.call("POST", f"/users/{user}")
            assert code == 201, body
        for group, members in groups.items():
            code, body = hub.call("POST", f"/groups/{group}")
            assert code == 201, body
            code, body = hub.call("POST", f"/groups/{group}/users", {"users": members})
            assert code == 200, body
        yield hub
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


def dig(document: object, *path: str | int) -> Any:
    """The value at ``path`` in a JSON document, or None where it is not there (yet): what a
    wait's predicate reads, so that "not there yet" is False and never an exception."""
    for key in path:
        if isinstance(key, int):
            if not isinstance(document, list) or not -len(document) <= key < len(document):
                return None
        elif not isinstance(document, dict) or key not in document:
            return None
        document = document[key]
    return document


def spawn(hub: Hub, user: str) -> tuple[int, Any]:
    code, body = hub.call("POST", f"/users/{user}/server")
    if code in (201, 202):
        hub.wait(f"{user}'s server to be ready", lambda: (hub.server(user) or {}).get("ready"), 90)
    return code, body


def service_pid(hub: Hub) -> int:
    import psutil

    for child in psutil.Process(hub.process.pid).children(recursive=True):
        try:
            if "jupyter_gpucost.hub" in " ".join(child.cmdline()):
                return int(child.pid)
        except psutil.NoSuchProcess:
            continue
    raise AssertionError("the gpucost service process is not running")
