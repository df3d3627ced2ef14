"""The machine in a real JupyterLab: named in the tooltip and the panel, and after a budget
action the status bar says what still bills, with a button to stop the machine."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi
from playwright.sync_api import expect

from .conftest import screenshot, wait_until
from .test_panel import PANEL

pytestmark = pytest.mark.browser


@pytest.fixture
def imds() -> Iterator[StandIn]:
    cloud = Cloud()
    # 8 A100-80GB for 27.447 USD/h: the simulated trace shows 2 of them, $6.86/h
    cloud.aws_identity["instanceType"] = "p4de.24xlarge"
    yield from serve(cloud)


def test_the_machine_is_named_and_what_still_costs_is_said_after_the_action(
    lab_factory: Any, page: Any, tmp_path: Path, imds: StandIn
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        # 2 simulated A100s at $6.862/h: the 30 s countdown starts 22 s in and ends at the
        # budget, 52 s in (a budget spent at the first check would act at once)
        "--GpuCost.hard_budget_usd=0.10",
        "--GpuCost.budget_grace_s=30",
        "--GpuCost.budget_save_timeout_s=2",
        "--GpuCost.budget_action=shutdown",
        "--GpuCost.ledger_url=none",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
        f"--GpuCost.dmi_path={write_dmi(tmp_path / 'dmi', 'aws')}",
        env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url},
    )
    status = lab.api("gpucost/api/status")
    assert status["machine"]["instance_type"] == "p4de.24xlarge"  # type: ignore[index]

    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator("#jp-gpucost-status")
    expect(item).to_be_visible(timeout=60_000)
    expect(item).to_have_attribute(
        "title",
        re.compile(
            r"Machine: p4de\.24xlarge, on-demand, us-east-1 \(detected\); "
            r"priced as a whole instance: \$27\.45/h"
        ),
        timeout=30_000,
    )

    # the budget's countdown; "Save and stop now" ends it: kernels shut down
    expect(page.get_by_role("button", name="Save and stop now")).to_be_visible(timeout=60_000)
    page.get_by_role("button", name="Save and stop now").click()
    wait_until(
        "the budget action",
        lambda: lab.api("gpucost/api/budget")["state"] == "acted",  # type: ignore[index]
        60,
    )
    last = lab.api("gpucost/api/budget")["last_action"]  # type: ignore[index]
    assert last["message"].endswith("this machine still costs $6.86/h")
    # the toast and the status bar say the machine still costs, with a button to stop it
    expect(page.get_by_text(re.compile(r"this machine still costs \$6\.86/h")).first).to_be_visible(
        timeout=30_000
    )
    machine = page.locator("#jp-gpucost-machine")
    expect(machine).to_contain_text("this machine still costs $6.86/h", timeout=30_000)
    stop = machine.get_by_role("button", name="Stop machine")
    expect(stop).to_be_visible()
    page.wait_for_timeout(1_000)  # let the toasts settle
    screenshot(page, "machine-still-costs.png")

    # Stop machine: asked first, then the same countdown as a budget stop, which the user
    # may cancel
    stop.click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Stop this machine?", timeout=30_000)
    dialog.locator("button.jp-mod-warn").click()
    cancel = machine.get_by_role("button", name="Cancel stop")
    expect(cancel).to_be_visible(timeout=30_000)
    expect(
        page.get_by_text(
            re.compile(r"Stopping as you asked\. Notebooks are saved and the machine stops in")
        )
    ).to_be_visible(timeout=30_000)
    grace = lab.api("gpucost/api/budget")["grace"]  # type: ignore[index]
    assert grace["action"] == "stop-instance"
    assert grace["can_cancel"] is True
    screenshot(page, "machine-stop-countdown.png")
    cancel.click()
    wait_until(
        "the countdown cancelled",
        lambda: lab.api("gpucost/api/budget")["state"] != "grace",  # type: ignore[index]
        30,
    )


def test_the_panel_names_the_machine_and_stops_it_when_done_or_not(
    lab_factory: Any, page: Any, tmp_path: Path, imds: StandIn
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.budget_grace_s=60",
        "--GpuCost.ledger_url=none",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
        f"--GpuCost.dmi_path={write_dmi(tmp_path / 'dmi', 'aws')}",
        env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url},
    )
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    page.locator("#jp-gpucost-status").click()
    panel = page.locator(PANEL)
    section = panel.locator(".jp-gpucost-panel-machine")
    expect(section).to_contain_text(
        "Machine: p4de.24xlarge, on-demand, us-east-1 (detected); priced as a whole "
        "instance: $27.45/h",
        timeout=30_000,
    )
    # no kernel is busy: "when done" starts the countdown at once, which can be cancelled
    section.get_by_role("button", name="Stop machine when done").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Stop this machine?", timeout=30_000)
    expect(dialog).to_contain_text("When the running cells end")
    dialog.locator("button.jp-mod-warn").click()
    cancel = section.get_by_role("button", name="Cancel stop")
    expect(cancel).to_be_visible(timeout=30_000)
    expect(
        page.get_by_text(
            re.compile(
                r"Your run is done, as you asked to stop then\. "
                r"Notebooks are saved and the machine stops in"
            )
        )
    ).to_be_visible(timeout=30_000)
    grace = lab.api("gpucost/api/budget")["grace"]  # type: ignore[index]
    assert grace["reason"] == "done"
    assert grace["action"] == "stop-instance"
    screenshot(page, "machine-panel-stop-when-done.png")
    cancel.click()
    expect(section.get_by_role("button", name="Stop machine", exact=True)).to_be_visible(
        timeout=30_000
    )
    assert lab.api("gpucost/api/budget")["state"] != "grace"  # type: ignore[index]
