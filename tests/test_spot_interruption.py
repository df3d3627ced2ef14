"""A spot machine taken back, through a real Jupyter server and a real kernel.

The server runs on a machine whose DMI says EC2 and whose metadata stand-in answers as
IMDSv2 documents: life cycle ``spot``, ``spot/instance-action`` 404 until the test sets
``{"action": "terminate", "time": ...}``. A page with an unsaved notebook answers the save
request as JupyterLab does (it saves through the contents API and acknowledges); a real
kernel runs a training loop under the guard with ``on_interrupt``. When the notice comes,
everything is done within it: the notebook saved, the guard's checkpoint written and
exported to S3 with its manifest, the ledger's record kept; and the next session says
what it cost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from alert_receivers import Http
from cloud_standins import Cloud, StandIn, serve, write_dmi
from s3_server import BUCKET
from test_budget_api import budget, wait_for

from jupyter_gpucost.server.ledger import Ledger

pytestmark = pytest.mark.usefixtures("jp_serverapp")

NOTICE_S = 40

TRAIN = """
import pathlib, time
from jupyter_gpucost import guard

def save_checkpoint(g):
    path = pathlib.Path("checkpoints") / f"step-{g.steps}.pt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"weights at step {g.steps}")
    return path

with guard(budget_usd=100, total_steps=10**9, usd_per_hour=1, display=False,
           on_interrupt=save_checkpoint) as g:
    for step in range(10**9):
        time.sleep(0.01)
        g.step()
"""


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    for s in serve(Cloud(aws_life_cycle="spot")):
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url)
        yield s


@pytest.fixture
def ledger_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.sqlite'}"


@pytest.fixture
def gpucost_config(
    standin: StandIn, tmp_path: Path, s3_endpoint: str, ledger_url: str, http_receiver: Http
) -> dict[str, object]:
    return {
        "notify": [f"webhook://127.0.0.1:{http_receiver.port}/pi"],
        "notify_state_path": str(tmp_path / "alerts.json"),
        "telemetry": "simulated",
        "sample_interval_s": 0.2,
        "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
        "ledger_url": ledger_url,
        "budget_state_path": str(tmp_path / "budget.json"),
        "export_on_interrupt": True,
        "export_targets": {
            "s3": {
                "url": f"s3://{BUCKET}/spot",
                "options": {
                    "endpoint_url": s3_endpoint,
                    "key": "testing",
                    "secret": "testing",
                    "region_name": "us-east-1",
                },
            }
        },
        "export_default_target": "s3",
    }


NOTEBOOK = {
    "cells": [],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


async def page_saves_when_asked(jp_fetch: Any, edits: str) -> None:
    """What an open JupyterLab page does: poll (naming itself), save its notebook with its
    unsaved edits when asked, and acknowledge."""
    while True:
        state = json.loads(
            (await jp_fetch("gpucost", "api", "budget", params={"client": "page-1"})).body
        )
        request = state.get("save_request")
        if request:
            content = {
                **NOTEBOOK,
                "cells": [{"cell_type": "markdown", "id": "a1", "metadata": {}, "source": edits}],
            }
            body = json.dumps({"type": "notebook", "format": "json", "content": content})
            await jp_fetch("api", "contents", "train.ipynb", method="PUT", body=body)
            ack = {
                "request_id": request["id"],
                "client": "page-1",
                "saved": ["train.ipynb"],
                "failed": [],
            }
            await jp_fetch("gpucost", "api", "budget", "saved", method="POST", body=json.dumps(ack))
            return
        await asyncio.sleep(0.2)


async def execute(client: Any, code: str) -> dict[str, Any]:
    """Run ``code`` in the kernel; its execute_reply's content."""
    msg_id = client.execute(code)
    while True:
        reply = await asyncio.wait_for(client._async_get_shell_msg(), 30)
        if reply["parent_header"].get("msg_id") == msg_id:
            return dict(reply["content"])


async def test_notice_saves_checkpoints_exports_and_records_within_it(
    jp_fetch: Any,
    jp_serverapp: Any,
    jp_root_dir: Path,
    standin: StandIn,
    ledger_url: str,
    http_receiver: Http,
) -> None:
    # the watcher asks, at AWS's rate, with a session token
    async def watching() -> bool:
        return "/latest/meta-data/spot/instance-action" in standin.paths()

    await wait_for(watching, 10, "the watcher to ask EC2's metadata")
    body = json.dumps({"type": "notebook", "format": "json", "content": NOTEBOOK})
    await jp_fetch("api", "contents", "train.ipynb", method="PUT", body=body)
    page = asyncio.create_task(page_saves_when_asked(jp_fetch, "unsaved edit before the notice"))

    km = jp_serverapp.kernel_manager
    # the notebook's kernel, in the notebook's folder (as JupyterLab starts it)
    kid = await km.start_kernel(kernel_name="python3", path="train.ipynb")
    client = km.get_kernel(kid).client()
    client.start_channels()
    # another notebook, no guard: code to run at the notice, and a busy cell
    other = await km.start_kernel(kernel_name="python3", path="other.ipynb")
    other_client = km.get_kernel(other).client()
    other_client.start_channels()
    try:
        await asyncio.wait_for(client._async_wait_for_ready(), 60)
        msg_id = client.execute(TRAIN)
        await asyncio.wait_for(other_client._async_wait_for_ready(), 60)
        for code in (
            "%load_ext jupyter_gpucost",
            "answer = 41 + 1",
            "%gpucost on-interrupt import pathlib; pathlib.Path('kept.txt').write_text(str(answer))",
        ):
            assert (await execute(other_client, code))["status"] == "ok", code
        # code that cannot run is refused when it is given, not at the notice
        refused = await execute(other_client, "%gpucost on-interrupt save(")
        assert refused["status"] == "error"
        assert refused["ename"] == "UsageError"
        other_client.execute("import time\nwhile True:\n    time.sleep(0.05)")

        def registered() -> bool:
            folder = Path(jp_serverapp.runtime_dir)
            return any(folder.glob("gpucost-interruption-*/guard-*.json"))

        async def training() -> bool:
            return await asyncio.to_thread(registered)

        await wait_for(training, 30, "the guarded loop to start")
        deadline = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=NOTICE_S)
        standin.cloud.aws_instance_action = {
            "action": "terminate",
            "time": deadline.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

        async def recorded() -> bool:
            current = ((await budget(jp_fetch)).get("interruption") or {}).get("current")
            return bool(current and "session_cost_micro_usd" in current)

        await wait_for(recorded, NOTICE_S, "the interruption's steps to end")
        ended = datetime.now(UTC)
        assert ended < deadline, "everything is done within the notice"
        await asyncio.wait_for(page, 5)
        state = await budget(jp_fetch)
        current = state["interruption"]["current"]
        steps = {s["name"]: s for s in current["steps"]}
        assert [s["name"] for s in current["steps"]] == [
            "tell",
            "save",
            "checkpoint",
            "on-interrupt",
            "export",
        ]
        assert {n: s["state"] for n, s in steps.items()} == {
            "tell": "done",
            "save": "done",
            "checkpoint": "done",
            "on-interrupt": "done",
            "export": "done",
        }
        # the busy notebook was interrupted and its code ran, with its variables
        assert (jp_root_dir / "kept.txt").read_text() == "42"
        # the user was told, with the seconds left
        told = [e for e in state["events"] if e["kind"] == "interruption"]
        assert len(told) == 1
        assert 0 < told[0]["seconds_left"] <= NOTICE_S
        assert "AWS" in told[0]["message"]
        done = [e for e in state["events"] if e["kind"] == "interruption-done"]
        assert "not finished in time" not in done[0]["message"]

        # the notebook's edits are on disk
        saved = json.loads((jp_root_dir / "train.ipynb").read_text())
        assert "".join(saved["cells"][0]["source"]) == "unsaved edit before the notice"

        # the guard wrote its checkpoint and stopped the loop with MachineInterrupted
        checkpoints = list((jp_root_dir / "checkpoints").glob("step-*.pt"))
        assert len(checkpoints) == 1
        reply = await asyncio.wait_for(client._async_get_shell_msg(), 20)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = await asyncio.wait_for(client._async_get_shell_msg(), 20)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "MachineInterrupted"

        # exported to S3, with its manifest
        s3 = boto3.client(
            "s3",
            endpoint_url=jp_serverapp.config["GpuCost"]["export_targets"]["s3"]["options"][
                "endpoint_url"
            ],
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        name = checkpoints[0].name
        got = s3.get_object(Bucket=BUCKET, Key=f"spot/{name}")["Body"].read()
        assert got == checkpoints[0].read_bytes()
        manifest = json.loads(
            s3.get_object(Bucket=BUCKET, Key=f"spot/{name}.manifest.json")["Body"].read()
        )
        assert manifest["source_path"] == f"checkpoints/{name}"

        # the ledger keeps it: when, which machine, the cost, what was lost
        records = [r for r in Ledger(ledger_url).actions() if r["action"] == "interruption"]
        assert len(records) == 1
        record = records[0]
        assert record["provider"] == "aws"
        assert record["instance_id"] == "i-0123456789abcdef0"
        assert record["instance_type"] == "p5.48xlarge"
        assert record["deadline"].startswith(deadline.strftime("%Y-%m-%dT%H:%M:%S"))
        assert record["session_cost_micro_usd"] > 0
        # a checkpoint landed during the notice: little is lost, never more than the session
        assert 0 <= record["lost_micro_usd"] < record["session_cost_micro_usd"]
        assert record["checkpoint"] is True

        # the person in charge is told, once, with what was done
        async def alerted() -> bool:
            return any(d.get("kind") == "stopped" for d in http_receiver.at("/pi"))

        await wait_for(alerted, 20, "the interruption's alert")
        (alert,) = [d for d in http_receiver.at("/pi") if d.get("kind") == "stopped"]
        assert "interruption" in alert["subject"]
        assert record["message"] in alert["message"]
        assert "took the machine back" in alert["message"]
    finally:
        client.stop_channels()
        other_client.stop_channels()
        await km.shutdown_kernel(kid)
        await km.shutdown_kernel(other)


class TestNextSession:
    """A server restarted on the same ledger says what the interruption cost."""

    @pytest.fixture
    def ledger_url(self, tmp_path: Path) -> str:
        url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
        ledger = Ledger(url)
        ledger.add_action(
            "earlier-session",
            {
                "action": "interruption",
                "at": "2026-11-27T14:01:50+00:00",
                "deadline": "2026-11-27T14:02:00+00:00",
                "provider": "aws",
                "market": "spot",
                "instance_type": "p5.48xlarge",
                "instance_id": "i-0123456789abcdef0",
                "session_cost_micro_usd": 2_410_000,
                "lost_micro_usd": 410_000,
                "checkpoint": False,
                "steps": [],
            },
        )
        ledger.close()
        return url

    async def test_the_panel_says_when_by_whom_and_what_it_cost(
        self, jp_fetch: Any, standin: StandIn
    ) -> None:
        last = (await budget(jp_fetch))["interruption"]["last"]
        assert last["line"] == (
            "interrupted at 14:02 UTC by AWS (spot): $0.41 since the last checkpoint"
        )
        assert last["deadline"] == "2026-11-27T14:02:00+00:00"
        assert last["instance_type"] == "p5.48xlarge"


class TestOnDemand:
    """An on-demand machine of the same cloud: no watcher, no notice request."""

    @pytest.fixture
    def standin(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
        for s in serve(Cloud(aws_life_cycle="on-demand")):
            monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url)
            yield s

    async def test_asks_nothing_after_detection(self, jp_fetch: Any, standin: StandIn) -> None:
        await asyncio.sleep(1.5)
        assert (await budget(jp_fetch))["interruption"] is None
        paths = standin.paths()
        assert not [p for p in paths if "spot" in p or "recommendations" in p]
        assert all(
            p
            in (
                "/latest/api/token",
                "/latest/dynamic/instance-identity/document",
                "/latest/meta-data/instance-life-cycle",
            )
            for p in paths
        )


class TestWatchOff:
    """``watch_interruptions = False``: a spot machine's notice is never asked for."""

    @pytest.fixture
    def gpucost_config(self, standin: StandIn, tmp_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "budget_state_path": str(tmp_path / "budget.json"),
            "watch_interruptions": False,
        }

    async def test_nothing_is_asked(self, jp_fetch: Any, standin: StandIn) -> None:
        await asyncio.sleep(1.5)
        assert (await budget(jp_fetch))["interruption"] is None
        assert not [p for p in standin.paths() if "spot" in p or "recommendations" in p]
        # detection itself still read the machine (a spot one)
        assert "/latest/meta-data/instance-life-cycle" in standin.paths()
