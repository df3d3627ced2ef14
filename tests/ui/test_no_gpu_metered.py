"""No GPU seen is a state, not $0, in a real JupyterLab and Notebook 7 whose server's NVML
cannot start (no ``libnvidia-ml.so`` here, as in a container without the driver's library).

The status bar and Notebook 7's chip say "GPU cost unknown ⚠" with the reason; the panel says
why and turns budgets off with a sentence; a known instance is priced whole and labelled so.
"""

from __future__ import annotations

import json
import re
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi
from playwright.sync_api import expect

from .conftest import ARTIFACTS, screenshot, wait_until
from .test_panel import PANEL

pytestmark = pytest.mark.browser

TOP_BAR = ".jp-gpucost-TopBarItem"
REFUSAL = "no GPU is metered: a budget cannot act"


def no_nvml_lab(
    lab_factory: Any, tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> Any:
    lab = lab_factory(
        "--GpuCost.telemetry=nvml",
        "--GpuCost.ledger_url=none",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
        *args,
        env=env,
    )
    status: Any = lab.api("gpucost/api/status")
    if status["gpus"]:
        pytest.skip("this machine has an NVIDIA driver: NVML sees its GPUs")
    return lab


def test_jupyterlab_says_the_cost_is_unknown_and_why_and_turns_budgets_off(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = no_nvml_lab(lab_factory, tmp_path)
    status: Any = lab.api("gpucost/api/status")
    assert status["metering"]["state"] == "unknown"
    reason = status["metering"]["reason"]
    assert "libnvidia-ml.so" in reason or "NVML" in reason, reason

    # the server refuses a budget with the sentence
    with pytest.raises(urllib.error.HTTPError) as refused:
        lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": 5, "scope": "session"})
    assert refused.value.code == 409
    assert json.loads(refused.value.read())["message"] == REFUSAL

    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator("#jp-gpucost-status")
    expect(item).to_have_text("GPU cost unknown ⚠", timeout=60_000)
    expect(item).to_have_attribute("data-state", "unknown")
    expect(item).to_have_attribute("title", re.compile(re.escape(reason)))
    expect(item).not_to_contain_text("$0.00")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".jp-StatusBar-Widget").screenshot(path=str(ARTIFACTS / "no-gpu-statusbar.png"))

    item.click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    banner = panel.locator("[data-state='cost-unknown']")
    expect(banner).to_contain_text("GPU cost unknown ⚠")
    expect(banner).to_contain_text(reason)
    session = panel.locator("[data-total='session'] .jp-gpucost-total-value")
    expect(session).to_have_text("unknown ⚠")
    expect(panel.locator("[data-state='budget-disabled']")).to_have_text(
        f"Budgets are off: {REFUSAL}."
    )
    # no form to set a budget that could never act
    expect(panel.locator(".jp-gpucost-panel-budget input")).to_have_count(0)
    screenshot(page, "no-gpu-panel.png")


def test_notebook7_s_chip_says_the_same_and_so_does_its_panel(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = no_nvml_lab(lab_factory, tmp_path)
    page.set_viewport_size({"width": 1000, "height": 800})
    page.goto(f"{lab.url}/tree?token={lab.token}", timeout=60_000)
    item = page.locator(TOP_BAR)
    expect(item).to_contain_text("GPU cost unknown ⚠", timeout=60_000)
    expect(item).to_have_attribute("title", re.compile("libnvidia-ml|NVML"))
    expect(item).not_to_contain_text("$0.00")
    screenshot(page, "no-gpu-notebook7.png")
    item.click()
    panel = page.locator("#jp-gpucost-panel-widget")
    expect(panel).to_be_visible(timeout=30_000)
    expect(panel.locator("[data-state='cost-unknown']")).to_contain_text("GPU cost unknown ⚠")
    expect(panel.locator("[data-state='budget-disabled']")).to_contain_text(REFUSAL)
    screenshot(page, "no-gpu-notebook7-panel.png")


def test_in_chinese_the_unknown_cost_and_its_reason_read_in_chinese(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = no_nvml_lab(lab_factory, tmp_path)
    lab.api(
        "lab/api/settings/@jupyterlab/translation-extension:plugin",
        method="PUT",
        body={"raw": json.dumps({"locale": "zh_CN"})},
    )

    # the server follows JupyterLab's language within a second
    def in_chinese() -> bool:
        status: Any = lab.api("gpucost/api/status")
        return "预算" in str((status.get("metering") or {}).get("budget"))

    wait_until("the server's language", in_chinese, 30)
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator("#jp-gpucost-status")
    expect(item).to_have_attribute("data-state", "unknown", timeout=60_000)
    expect(item).to_contain_text("⚠")
    expect(item).not_to_contain_text("GPU cost unknown")
    expect(item).to_have_attribute("title", re.compile("libnvidia-ml.so"))
    item.click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    expect(panel.locator("[data-state='budget-disabled']")).to_contain_text("预算")
    expect(panel.locator("[data-state='budget-disabled']")).not_to_contain_text("budget")
    screenshot(page, "zh-no-gpu-panel.png")


@pytest.fixture
def imds() -> Iterator[StandIn]:
    # a p5.48xlarge: 8 H100s for 55.04 USD/h
    yield from serve(Cloud())


def test_a_known_instance_is_priced_whole_and_labelled_so(
    lab_factory: Any, page: Any, tmp_path: Path, imds: StandIn
) -> None:
    lab = no_nvml_lab(
        lab_factory,
        tmp_path,
        f"--GpuCost.dmi_path={write_dmi(tmp_path / 'dmi', 'aws')}",
        env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url},
    )
    status: Any = lab.api("gpucost/api/status")
    assert status["metering"]["state"] == "instance"
    assert status["rate_usd_per_hour"] == 55.04

    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator("#jp-gpucost-status")
    expect(item).to_have_attribute("data-state", "instance", timeout=60_000)
    expect(item).to_contain_text("$55.04/h")
    expect(item).to_contain_text("p5.48xlarge, priced whole")
    expect(item).to_have_attribute("title", re.compile("priced whole from its instance"))
    item.click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    expect(panel.locator("[data-state='whole-instance']")).to_contain_text(
        "p5.48xlarge, priced whole"
    )
    # a budget can act on the whole instance: its form is there
    expect(panel.locator("[data-state='budget-disabled']")).to_have_count(0)
    screenshot(page, "no-gpu-whole-instance.png")
