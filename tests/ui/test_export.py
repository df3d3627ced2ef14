"""Checkpoint export as a person does it: right-click, pick a target, watch, copy the address."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import boto3
import pytest
from playwright.sync_api import expect
from s3_server import BUCKET

from .conftest import screenshot

pytestmark = pytest.mark.browser


def test_right_click_export_to_s3_lands_the_checkpoint_byte_for_byte(
    lab_factory: Any, page: Any, s3_endpoint: str, tmp_path: Path
) -> None:
    config = tmp_path / "export_config.py"
    targets = {
        "team": {
            "url": f"s3://{BUCKET}/ui",
            "label": "Team bucket",
            "options": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
        }
    }
    config.write_text(
        f"c.GpuCost.export_targets = {json.dumps(targets)}\nc.GpuCost.export_part_size_mb = 5\n"
    )
    lab = lab_factory("--GpuCost.telemetry=simulated", f"--config={config}")
    data = os.urandom(6 * 1024 * 1024 + 123)
    lab.api("api/contents/run", method="PUT", body={"type": "directory"})
    lab.api(
        "api/contents/run/model.safetensors",
        method="PUT",
        body={"type": "file", "format": "base64", "content": base64.b64encode(data).decode()},
    )
    lab.api(
        "api/contents/run/notes.txt",
        method="PUT",
        body={"type": "file", "format": "text", "content": "not a checkpoint"},
    )

    page.goto(f"{lab.url}/lab/tree/run?token={lab.token}", timeout=60_000)
    listing = page.locator(".jp-DirListing-content")
    item = listing.locator(".jp-DirListing-item", has_text="model.safetensors")
    expect(item).to_be_visible(timeout=60_000)

    # not offered on a file that is not a checkpoint
    listing.locator(".jp-DirListing-item", has_text="notes.txt").click(button="right")
    menu = page.locator(".lm-Menu").last
    expect(menu).to_be_visible()
    expect(menu.locator(".lm-Menu-item", has_text="Rename")).to_be_visible()
    expect(menu.locator(".lm-Menu-item", has_text="Export to")).to_be_hidden()
    page.keyboard.press("Escape")

    item.click(button="right")
    entry = page.locator(".lm-Menu").last.locator(".lm-Menu-item", has_text="Export to")
    expect(entry).to_be_visible()
    entry.click()

    # two targets (the bucket and the local folder): a picker, on the server's default
    # (the one target the admin configured)
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Export model.safetensors")
    select = dialog.locator("select[aria-label='Export target']")
    expect(select.locator("option")).to_have_count(2)
    expect(select).to_have_value("team")
    select.select_option("local")
    select.select_option("team")
    dialog.locator(".jp-mod-accept").click()

    toast = page.locator(".Toastify__toast", has_text="Exported model.safetensors")
    expect(toast).to_contain_text(f"s3://{BUCKET}/ui/model.safetensors", timeout=60_000)
    expect(toast.get_by_role("button", name="Copy address")).to_be_visible()
    screenshot(page, "export-done.png")

    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    landed = s3.get_object(Bucket=BUCKET, Key="ui/model.safetensors")["Body"].read()
    assert landed == data
    manifest = json.loads(
        s3.get_object(Bucket=BUCKET, Key="ui/model.safetensors.manifest.json")["Body"].read()
    )
    assert manifest["source_path"] == "run/model.safetensors"
    assert manifest["size_bytes"] == len(data)
    jobs = lab.api("gpucost/api/exports")["jobs"]  # type: ignore[index]
    assert [j["state"] for j in jobs] == ["done"]
