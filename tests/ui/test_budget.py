"""At the budget, in a real JupyterLab: warning, countdown, then nothing typed is lost."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_gpucost.core.money import budget as budget_text

from .conftest import screenshot, wait_until

pytestmark = pytest.mark.browser

TYPED = "print('typed in the browser, never saved by hand: 4242')"
NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "first",
            "metadata": {},
            "outputs": [],
            "source": "",
        }
    ],
    "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


def on_disk(lab: Any) -> str:
    model = lab.api("api/contents/work.ipynb?content=1")
    return "".join("".join(c["source"]) for c in model["content"]["cells"])


def test_budget_runs_out_the_typed_text_is_saved_and_the_kernel_shut_down(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        "--GpuCost.budget_grace_s=20",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    # no autosave: whatever reaches the disk was saved by the budget
    lab.api(
        "lab/api/settings/@jupyterlab/docmanager-extension:plugin",
        method="PUT",
        body={"raw": '{"autosave": false}'},
    )
    lab.api("api/contents/work.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK})

    page.goto(f"{lab.url}/lab/tree/work.ipynb?token={lab.token}", timeout=60_000)
    editor = page.locator(".jp-Notebook .jp-Cell .cm-content").first
    editor.wait_for(state="visible", timeout=60_000)
    wait_until("the notebook's kernel to start", lambda: len(lab.api("api/kernels")) == 1, 60)
    expect(page.locator(".jp-Notebook-ExecutionIndicator, .jp-KernelStatus").first).to_be_visible(
        timeout=30_000
    )
    editor.click()
    page.keyboard.type(TYPED)
    expect(editor).to_contain_text("4242")
    assert "4242" not in on_disk(lab)

    # a budget of mine that runs out in about 6 s at the simulated $6.86/h
    spent = lab.api("gpucost/api/status")["cost_usd"]  # type: ignore[index]
    amount = round(spent + 0.012, 6)
    body = lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": amount})
    assert body["soft"]["locked"] is False  # type: ignore[index]
    item = page.locator("#jp-gpucost-budget")
    expect(item).to_be_visible(timeout=15_000)
    # the 95 % warning, pushed by the server, and the status bar's warning state
    expect(
        # the budget as it was set, every micro-dollar of it (not rounded to cents)
        page.get_by_text(f"95% of your {budget_text(Decimal(str(amount)))} session budget is spent")
    ).to_be_visible(timeout=30_000)
    expect(page.locator("#jp-gpucost-status")).to_have_attribute(
        "data-budget", re.compile("warning|exceeded"), timeout=15_000
    )
    screenshot(page, "budget-warning.png")

    # the countdown: visible, counting down, with both buttons for a budget of my own; set
    # with less than the grace left, it runs the full grace (the budget runs out, then is
    # spent, as it goes)
    counting = re.compile(
        r"Your budget (is spent|of \$\S+ runs out at the current rate)\. .* in 0:0\d"
    )
    countdown = page.get_by_text(counting)
    expect(countdown).to_be_visible(timeout=30_000)
    expect(page.get_by_role("button", name="Save and stop now")).to_be_visible()
    expect(page.get_by_role("button", name="Raise budget")).to_be_visible()
    expect(page.locator("#jp-gpucost-status")).to_have_attribute("data-budget", "exceeded")
    expect(item).to_contain_text(re.compile(r"stops? (at \S+ )?in 0:0"))
    first = countdown.inner_text()
    page.wait_for_timeout(2_000)
    second = page.get_by_text(counting).inner_text()
    assert first != second, (first, second)
    screenshot(page, "budget-countdown.png")

    # then: the notebook saved by the page, the kernel shut down. The action's record is
    # written only after the page acknowledged its save (its save request had completed), so
    # the notebook is read once the record is there: never while the save is writing it
    wait_until(
        "the budget's action recorded",
        lambda: lab.api("gpucost/api/budget")["last_action"] is not None,  # type: ignore[index]
        60,
    )
    wait_until("the kernel shut down", lambda: lab.api("api/kernels") == [], 60)
    assert TYPED in on_disk(lab)
    last = lab.api("gpucost/api/budget")["last_action"]  # type: ignore[index]
    assert last["notebooks_saved"] == 1
    assert last["kernels"] == 1
    assert "1 notebook saved" in last["message"]
    expect(
        page.get_by_text(
            re.compile(
                rf"stopped at {re.escape(budget_text(Decimal(str(amount))))} budget at "
                ".*1 notebook saved"
            )
        )
    ).to_be_visible(timeout=15_000)
    # the notebook shows its kernel is gone
    expect(page.locator(".jp-Toolbar-kernelName").first).to_contain_text(
        "No Kernel", timeout=30_000
    )
    page.wait_for_timeout(1_000)  # let the toasts settle
    screenshot(page, "budget-stopped.png")


def test_raise_budget_from_the_countdown(lab_factory: Any, page: Any, tmp_path: Path) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        "--GpuCost.budget_grace_s=30",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    kernel = lab.api("api/kernels", method="POST", body={})
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    page.locator("#jp-gpucost-status").wait_for(state="visible", timeout=60_000)
    spent = lab.api("gpucost/api/status")["cost_usd"]  # type: ignore[index]
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": round(spent + 0.004, 6)})

    raise_button = page.get_by_role("button", name="Raise budget")
    expect(raise_button).to_be_visible(timeout=30_000)
    raise_button.click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Raise your budget", timeout=10_000)
    # it says what is spent, and proposes an amount above it
    expect(dialog).to_contain_text("spent so far")
    spent_now = lab.api("gpucost/api/budget")["soft"]["spent_usd"]  # type: ignore[index]
    assert float(dialog.locator("input").input_value()) > spent_now
    dialog.locator("input").fill("50")
    dialog.get_by_role("button", name=re.compile("^OK$", re.IGNORECASE)).click()

    item = page.locator("#jp-gpucost-budget")
    expect(item).to_contain_text("of $50.00", timeout=15_000)
    expect(page.locator("#jp-gpucost-status")).not_to_have_attribute(
        "data-budget", "exceeded", timeout=15_000
    )
    expect(page.get_by_text(re.compile(r"Your budget is spent\."))).to_have_count(0, timeout=15_000)
    body = lab.api("gpucost/api/budget")
    assert body["soft"]["amount_usd"] == 50  # type: ignore[index]
    assert body["grace"] is None  # type: ignore[index]
    # written back to the settings, so a reload does not set the old budget again
    settings = lab.api("lab/api/settings/jupyter-gpucost:budget")
    assert settings["settings"]["softBudgetUsd"] == 50  # type: ignore[index]
    assert kernel["id"] in [k["id"] for k in lab.api("api/kernels")]  # type: ignore[index,union-attr]
    screenshot(page, "budget-raised.png")
