"""A real Jupyter server with the extension in a process of its own, for the tests that
kill it or signal it (``test_restart.py``, ``test_spot_sigterm.py``): on a free loopback
port, its own config, data and runtime folders, simulated telemetry and no machine
detection, whatever machine runs the tests."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class ServerProcess:
    """Started and answering ``GET /gpucost/api/status`` (within 60 s) once constructed.

    ``settings`` are ``GpuCost`` traits (``--GpuCost.<name>=<value>``); ``env`` adds to
    the environment the server inherits. Its output goes to :attr:`log_path`.
    """

    def __init__(
        self, tmp: Path, settings: Mapping[str, object], env: Mapping[str, str] | None = None
    ) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.token = secrets.token_hex(16)
        environ = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(tmp / "config"),
            "JUPYTER_DATA_DIR": str(tmp / "data"),
            "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
            **(env or {}),
        }
        (tmp / "root").mkdir(parents=True, exist_ok=True)
        self.log_path = tmp / "server.log"
        self.log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                "--no-browser",
                "--allow-root",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={tmp / 'root'}",
                "--ServerApp.jpserver_extensions={'jupyter_gpucost': True}",
                "--GpuCost.telemetry=simulated",
                # no metadata service is ever asked, whatever machine runs the tests
                "--GpuCost.detect_machine=False",
                *(f"--GpuCost.{name}={value}" for name, value in settings.items()),
            ],
            env=environ,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.get("status")
                return
            except (urllib.error.URLError, ConnectionError):
                assert self.process.poll() is None, self.log_path.read_text()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)

    def get(self, route: str, **params: str) -> Any:
        """``GET /gpucost/api/<route>?<params>``, the answer's JSON."""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/gpucost/api/{route}" + (f"?{query}" if query else ""),
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def kill(self, sig: int) -> None:
        """``sig`` to the server's whole process group; waits until it is gone."""
        os.killpg(self.process.pid, sig)
        self.process.wait(20)
        self.log.close()

    def stop(self) -> None:
        """Killed (SIGKILL) unless it already stopped."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(20)
        self.log.close()
