"""Browser tests: a real JupyterLab server in a subprocess and headless Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from waiting import wait_until  # noqa: F401 - the UI tests import it from here

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("GPUCOST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lab:
    url: str
    token: str
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, *, method: str = "GET", body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
        return json.loads(text) if text else None


def start_lab(
    tmp: Path, *args: str, env: dict[str, str] | None = None, python: str = sys.executable
) -> Lab:
    """JupyterLab with these arguments; ``env``: variables added to its environment (as a
    spawner sets them); ``python``: the environment's interpreter (another JupyterLab's)."""
    port, token = free_port(), secrets.token_hex(16)
    log = tmp / "lab.log"
    extra = env or {}
    env = {
        **os.environ,
        **extra,
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
    }
    (tmp / "root").mkdir(exist_ok=True)
    # an empty DMI folder: no metadata service is asked, whatever machine runs the tests
    (tmp / "no-dmi").mkdir(exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                python,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--allow-root",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={tmp / 'root'}",
                *(
                    []
                    if any(a.startswith("--GpuCost.dmi_path=") for a in args)
                    else [f"--GpuCost.dmi_path={tmp / 'no-dmi'}"]
                ),
                # prices are per region: the shipped default provider's first region, unless
                # the test names a provider, a region or a machine of its own
                *(
                    []
                    if any(
                        a.startswith(
                            (
                                "--GpuCost.price_provider=",
                                "--GpuCost.price_region=",
                                "--GpuCost.dmi_path=",
                            )
                        )
                        for a in args
                    )
                    else ["--GpuCost.price_region=us-east-1"]
                ),
                *args,
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # another environment's JupyterLab imports its own jupyter_gpucost, never this
            # tree's (which `python -m` would find first in the working directory)
            cwd=None if python == sys.executable else tmp,
        )
    lab = Lab(url=f"http://127.0.0.1:{port}", token=token, process=process, log=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited:\n{log.read_text()[-3000:]}")
        try:
            lab.api("api/status")
            return lab
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.25)
    stop_lab(lab)
    raise RuntimeError(f"JupyterLab did not start in 60 s:\n{log.read_text()[-3000:]}")


def stop_lab(lab: Lab) -> None:
    if lab.process.poll() is None:
        os.killpg(lab.process.pid, signal.SIGTERM)
        try:
            lab.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(lab.process.pid, signal.SIGKILL)
            lab.process.wait(5)


# These tests run JupyterLab in a subprocess, not in-process: pytest-jupyter's autouse loop
# fixtures would otherwise take Playwright's running event loop as theirs and close it.
@pytest.fixture
def jp_asyncio_loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def jp_server_cleanup() -> None:
    return None


@pytest.fixture
def lab_factory(tmp_path: Path) -> Iterator[Callable[..., Lab]]:
    started: list[Lab] = []

    def factory(*args: str, env: dict[str, str] | None = None, python: str = sys.executable) -> Lab:
        folder = tmp_path / f"lab{len(started)}"
        folder.mkdir()
        lab = start_lab(folder, *args, env=env, python=python)
        started.append(lab)
        return lab

    yield factory
    for lab in started:
        stop_lab(lab)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make test-ui`, which installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    page = context.new_page()
    yield page
    context.close()


def screenshot(page: object, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path))  # type: ignore[attr-defined]
    return path


def open_notebook(page: object, lab: Lab, path: str) -> object:
    """Open a notebook in JupyterLab and wait until its kernel is idle; the cells."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    page.goto(f"{lab.url}/lab/tree/{path}?token={lab.token}", timeout=60_000)  # type: ignore[attr-defined]
    cells = page.locator(".jp-Notebook .jp-Cell")  # type: ignore[attr-defined]
    cells.first.wait_for(state="visible", timeout=60_000)
    # JupyterLab may ask which kernel to use: take the one the notebook names
    dialog = page.locator(".jp-Dialog")  # type: ignore[attr-defined]
    try:
        dialog.wait_for(state="visible", timeout=5_000)
        dialog.locator(".jp-mod-accept").click()
    except PlaywrightTimeout:
        pass
    expect(page.locator(".jp-Toolbar-kernelName").first).to_contain_text(  # type: ignore[attr-defined]
        "Python 3", timeout=60_000
    )
    expect(
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")  # type: ignore[attr-defined]
    ).to_have_count(1, timeout=60_000)
    return cells
