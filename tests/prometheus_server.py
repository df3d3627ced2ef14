"""A real Prometheus on loopback for the tests (Debian's ``prometheus`` package; ``make
prometheus`` installs it): started with a scrape configuration the test writes, a short
scrape interval and its database in a temporary folder; stopped by its own pid."""

from __future__ import annotations

import base64
import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    def __init__(
        self,
        scrape_configs: list[dict[str, object]],
        *,
        basic_auth: tuple[str, str, str] | None = None,
    ) -> None:
        """``basic_auth``: (user, password, its bcrypt hash) Prometheus then requires."""
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("Prometheus is not installed: run `make prometheus`")
        self.root = Path(tempfile.mkdtemp(prefix="gpucost-prom-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": scrape_configs,
        }
        # JSON is YAML
        (self.root / "prometheus.yml").write_text(json.dumps(config))
        self.headers: dict[str, str] = {}
        web: list[str] = []
        if basic_auth is not None:
            user, password, hashed = basic_auth
            (self.root / "web.yml").write_text(json.dumps({"basic_auth_users": {user: hashed}}))
            web = [f"--web.config.file={self.root / 'web.yml'}"]
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self.headers = {"Authorization": f"Basic {token}"}
        self.log = open(self.root / "log", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={self.root / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.root / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                *web,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_ready(30)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.logged()}")
            try:
                ready = urllib.request.Request(f"{self.url}/-/ready", headers=self.headers)
                with urllib.request.urlopen(ready, timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready in {timeout_s} s: {self.logged()}")

    def logged(self) -> str:
        return (self.root / "log").read_text(errors="replace")[-2000:]

    def query(self, promql: str) -> list[dict[str, object]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=self.headers), timeout=5
        ) as r:
            doc = json.load(r)
        result: list[dict[str, object]] = doc["data"]["result"]
        return result

    def wait_for(self, promql: str, count: int, timeout_s: float = 30) -> list[dict[str, object]]:
        """Poll (bounded) until ``promql`` gives at least ``count`` series."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.query(promql)
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{promql}: {len(found)} series after {timeout_s} s")
            time.sleep(0.3)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)
