"""A real JupyterHub on loopback stops a user's server when its hard budget runs out.

One hub per test session (a subprocess, its routes kept in memory instead of a
configurable-http-proxy process: only the hub's REST API is used). The hub spawns
``jupyterhub-singleuser`` from this environment with simulated GPUs and a budget that
runs out in seconds; the test watches from outside, as an admin would.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hub_service_fixture import free_port

BIN = Path(sys.executable).parent
#: 2 simulated A100s cost $0.0019 a second: this budget is spent in about 10 s
BUDGET_USD = "0.02"


@dataclass
class Hub:
    api: str
    token: str
    root: Path
    process: subprocess.Popen[bytes]
    log: Path

    def call(self, method: str, path: str) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"{self.api}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
            data=b"" if method in ("POST", "DELETE") else None,
        )
        try:
            # the Hub holds a spawn request up to its slow_spawn_timeout (10 s) before it
            # answers 202: the client waits longer than that, on a busy machine too
            with urllib.request.urlopen(request, timeout=60) as response:
                body = response.read()
                return response.status, json.loads(body) if body else None
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def server(self, user: str) -> dict[str, Any] | None:
        code, body = self.call("GET", f"/users/{user}")
        assert code == 200, body
        return body["servers"].get("")  # type: ignore[no-any-return]

    def wait(self, what: str, predicate: Any, timeout_s: float) -> None:
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
            f"{self.log.read_text()[-4000:]}"
        )


HUB_CONFIG = """
import sys

sys.path.insert(0, {tests!r})
from memory_proxy import MemoryProxy


def scopes(spawner):
    base = ["users:activity!user", "access:servers!server", "read:servers!user"]
    # alice's server may stop itself through the hub; bob's may not (it stops itself)
    return base + (["delete:servers!user"] if spawner.user.name == "alice" else [])


# values may be callables of the spawner: per-user (or per-group) settings
environment = {{
    "GPUCOST_BUDGET_USD": "{budget}",
    "GPUCOST_BUDGET_GRACE_S": "2",
    "GPUCOST_BUDGET_ACTION": "stop-server",
    "JUPYTER_DATA_DIR": lambda spawner: "{root}/data/" + spawner.user.name,
    "JUPYTER_RUNTIME_DIR": lambda spawner: "{root}/runtime/" + spawner.user.name,
}}


c.JupyterHub.bind_url = "http://127.0.0.1:{public}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub}"
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
]
c.Spawner.environment = environment
c.Spawner.server_token_scopes = scopes
c.Spawner.poll_interval = 1
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 60
c.JupyterHub.services = [{{"name": "test-driver", "api_token": "{token}"}}]
c.JupyterHub.load_roles = [
    {{
        "name": "driver",
        "scopes": ["admin:users", "admin:servers", "read:hub", "access:servers"],
        "services": ["test-driver"],
    }}
]
"""


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hub")
    token = secrets.token_hex(16)
    hub_port = free_port()
    config = root / "jupyterhub_config.py"
    config.write_text(
        textwrap.dedent(
            HUB_CONFIG.format(
                tests=str(Path(__file__).parent),
                public=free_port(),
                hub=hub_port,
                root=root,
                token=token,
                budget=BUDGET_USD,
                singleuser=BIN / "jupyterhub-singleuser",
            )
        )
    )
    log = root / "hub.log"
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    for name in ("GPUCOST_BUDGET_USD", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_API_URL"):
        env.pop(name, None)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(config)],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    hub = Hub(f"http://127.0.0.1:{hub_port}/hub/api", token, root, process, log)

    def up() -> bool:
        try:
            return hub.call("GET", "/")[0] == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    try:
        hub.wait("the hub to start", up, 60)
        yield hub
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


def spawn(hub: Hub, user: str) -> float:
    code, body = hub.call("POST", f"/users/{user}")
    assert code == 201, body
    code, body = hub.call("POST", f"/users/{user}/server")
    assert code in (201, 202), body
    hub.wait(f"{user}'s server to be ready", lambda: (hub.server(user) or {}).get("ready"), 90)
    return time.monotonic()


def actions(hub: Hub, user: str) -> list[dict[str, Any]]:
    path = hub.root / "data" / user / "gpucost" / "budget.json"
    return list(json.loads(path.read_text())["actions"]) if path.exists() else []


def test_the_hub_stops_the_server_when_its_budget_runs_out(hub: Hub) -> None:
    ready = spawn(hub, "alice")
    hub.wait("the hub to report alice's server stopped", lambda: hub.server("alice") is None, 90)
    # a budget is a cap: the countdown (2 s) ends when the budget (about 10 s of the
    # server's 2 simulated A100s) is spent, not before
    assert time.monotonic() - ready >= 2
    (action,) = actions(hub, "alice")
    assert action["action"] == "stop-server"
    assert action["via"] == "jupyterhub"
    assert action["budget_kind"] == "hard"
    assert action["amount_usd"] == float(BUDGET_USD)
    assert action["message"].startswith("stopped at $0.02 budget at ")
    # the server asked with its own token (alice), not the admin service
    assert "DELETE /hub/api/users/alice/server (alice@127.0.0.1)" in hub.log.read_text()


def test_without_the_delete_scope_the_server_stops_itself(hub: Hub) -> None:
    spawn(hub, "bob")
    hub.wait("the hub to report bob's server stopped", lambda: hub.server("bob") is None, 90)
    action = actions(hub, "bob")[-1]
    assert action["via"] == "self"
    assert action["result"] == "done"
    assert "403" in action["hub"]
    assert "delete:servers!user" in action["hub"]
