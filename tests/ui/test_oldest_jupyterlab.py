"""The wheel a user installs, beside the oldest JupyterLab and Notebook 7 it supports.

``make test-ui`` builds the wheel from this tree and installs it with ``jupyterlab==4.0.*``
and ``notebook==7.0.*`` in a venv of its own (``.venv-oldest``), then names its interpreter
in ``GPUCOST_OLDEST_PYTHON``. An admin on an older image reads ``jupyter labextension list``
first: it must say OK. Then the surfaces a person uses: the status bar, the panel, a cell's
badge, Notebook 7's top bar, with no error of ours in the console.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import open_notebook, screenshot

OLDEST = os.environ.get("GPUCOST_OLDEST_PYTHON", "")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not OLDEST,
        reason="needs the oldest supported JupyterLab beside the wheel: run `make test-ui`",
    ),
]

SUPPORTED = re.compile(r"^4\.0\.\d+$")
NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "work",
            "metadata": {},
            "outputs": [],
            "source": "import time\ntime.sleep(0.5)\nprint('done')",
        }
    ],
    "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


def oldest(*args: str) -> str:
    done = subprocess.run(
        [OLDEST, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(OLDEST).parent,  # not this tree: `python -c` imports from the working dir
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


def test_the_environment_is_the_oldest_supported_one() -> None:
    assert Path(OLDEST).exists(), OLDEST
    versions = oldest(
        "-c", "import jupyterlab, notebook; print(jupyterlab.__version__, notebook.__version__)"
    ).split()
    assert SUPPORTED.match(versions[0]), versions
    assert versions[1].startswith("7.0."), versions
    # the wheel, not this tree: the package is imported from the venv's site-packages
    where = oldest("-c", "import jupyter_gpucost; print(jupyter_gpucost.__file__)")
    assert ".venv-oldest" in where, where
    assert "site-packages" in where, where


def test_labextension_list_says_ok_on_the_oldest_jupyterlab() -> None:
    listing = oldest("-m", "jupyter", "labextension", "list")
    (line,) = [row for row in listing.splitlines() if "jupyter-gpucost" in row]
    assert "enabled" in line, listing
    assert "OK" in line, listing
    assert "not compatible" not in listing, listing


def test_the_cost_panel_badges_and_top_bar_work_on_the_oldest_front_ends(
    lab_factory: Any, page: Any
) -> None:
    errors: list[str] = []
    page.on(
        "console",
        lambda message: errors.append(message.text) if message.type == "error" else None,
    )
    page.on("pageerror", lambda error: errors.append(str(error)))
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        "--GpuCost.detect_machine=False",
        python=OLDEST,
    )
    lab.api("api/contents/work.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK})

    # JupyterLab 4.0: the status bar's cost, then the panel it opens
    cells: Any = open_notebook(page, lab, "work.ipynb")
    item = page.locator("#jp-gpucost-status")
    expect(item).to_have_attribute("data-state", "simulated", timeout=60_000)
    expect(item).to_contain_text(re.compile(r"\$\d+\.\d+\s*·\s*\$6\.86/h"), timeout=30_000)
    item.click()
    panel = page.locator("#jp-gpucost-panel")
    expect(panel).to_be_visible(timeout=30_000)
    expect(panel.locator("table.jp-gpucost-kernels")).to_contain_text("work.ipynb", timeout=30_000)

    # a cell priced from the notebook's toolbar, its badge beside it
    page.locator(".lm-TabBar-tab", has_text="work.ipynb").click()
    toggle = page.locator(".jp-gpucost-cell-toggle button, button.jp-gpucost-cell-toggle").first
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true", timeout=30_000)
    cell = cells.nth(0)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    badge = cell.locator(".jp-gpucost-cell-badge")
    expect(badge).to_have_text(re.compile(r"^\$0\.\d{4} · \d+\.\d+ s$"), timeout=60_000)
    screenshot(page, "oldest-jupyterlab.png")

    # Notebook 7.0: the cost in the top bar of the tree and of a notebook
    for path in ("tree", "notebooks/work.ipynb"):
        page.goto(f"{lab.url}/{path}?token={lab.token}", timeout=60_000)
        top = page.locator(".jp-gpucost-TopBarItem")
        expect(top).to_contain_text(re.compile(r"\$\d+\.\d+"), timeout=60_000)
    screenshot(page, "oldest-notebook7.png")

    ours = [e for e in errors if "gpucost" in e.lower()]
    assert ours == [], ours
