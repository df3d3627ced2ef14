"""A spot machine taken back, in a real JupyterLab and a real Notebook 7 page: both count
down to the moment the cloud takes the machine back (a notification and the status bar),
save what was typed, then say what was done."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi
from playwright.sync_api import expect

from .conftest import screenshot, wait_until
from .test_budget import NOTEBOOK, TYPED, on_disk

pytestmark = pytest.mark.browser

NOTICE_S = 75
COUNTDOWN = re.compile(r"AWS takes this spot machine back in [01]:\d\d")


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve(Cloud(aws_life_cycle="spot"))


def test_countdown_in_every_tab_and_the_typed_text_saved(
    lab_factory: Any, page: Any, browser: Any, standin: StandIn, tmp_path: Path
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        f"--GpuCost.dmi_path={write_dmi(tmp_path / 'dmi', 'aws')}",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
        f"--GpuCost.ledger_url=sqlite:///{tmp_path / 'ledger.sqlite'}",
        env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": standin.url},
    )
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
    editor.click()
    page.keyboard.type(TYPED)
    expect(editor).to_contain_text("4242")
    assert "4242" not in on_disk(lab)

    # a Notebook 7 tab beside it
    classic = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        classic.goto(f"{lab.url}/tree?token={lab.token}", timeout=60_000)
        classic.wait_for_timeout(3_000)
        wait_until(
            "the watcher to ask EC2",
            lambda: "/latest/meta-data/spot/instance-action" in standin.paths(),
            30,
        )
        deadline = datetime.now(UTC) + timedelta(seconds=NOTICE_S)
        standin.cloud.aws_instance_action = {
            "action": "terminate",
            "time": deadline.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

        # the countdown, in JupyterLab: a notification and the status bar, counting down
        notice = page.get_by_text(COUNTDOWN)
        expect(notice.first).to_be_visible(timeout=20_000)
        item = page.locator("#jp-gpucost-interruption")
        expect(item).to_be_visible()
        expect(item).to_contain_text(re.compile(r"spot: taken back in [01]:\d\d"))
        first = item.inner_text()
        page.wait_for_timeout(2_000)
        assert item.inner_text() != first, "it counts down"
        expect(notice.first).to_be_visible()
        screenshot(page, "spot-countdown-lab.png")
        # and in Notebook 7
        expect(classic.get_by_text(COUNTDOWN).first).to_be_visible(timeout=20_000)
        screenshot(classic, "spot-countdown-notebook7.png")

        # the page saved what was typed; the server says what was done, step by step
        wait_until("the typed text saved", lambda: TYPED in on_disk(lab), 30)
        expect(
            page.get_by_text(
                re.compile(r"Spot interruption: told: done; notebooks saved: done")
            ).first
        ).to_be_visible(timeout=30_000)
        assert datetime.now(UTC) < deadline
        # the machine still goes at the deadline: the countdown goes on
        expect(item).to_contain_text(re.compile(r"spot: taken back in [01]:\d\d"))
        page.wait_for_timeout(1_000)
        screenshot(page, "spot-done.png")
    finally:
        classic.close()
