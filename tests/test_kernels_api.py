"""Kernels, history and ledger totals through the real server, with real kernels."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from nvml_stub import DRIVER_550, FakeNvml, FakeProcess, a100_80gb
from tornado.httpclient import HTTPClientError
from waiting import wait_for as wait

GIB = 2**30


async def get(jp_fetch: Any, route: str, **params: str) -> dict[str, Any]:
    return json.loads((await jp_fetch("gpucost", "api", route, params=params)).body)


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    nvml = FakeNvml([a100_80gb(processes=[], utilization=100)], DRIVER_550)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    return nvml


@pytest.fixture
def gpucost_config(fake_nvml: FakeNvml, tmp_path: Path) -> dict[str, object]:
    return {
        "telemetry": "nvml",
        "sample_interval_s": 0.2,
        "minimum_charge_s": 0,
        "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        "ledger_flush_interval_s": 0.5,
    }


async def start_notebook(jp_fetch: Any, jp_serverapp: Any, path: str) -> tuple[str, int]:
    answer = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps({"path": path, "type": "notebook", "kernel": {"name": "python3"}}),
    )
    kernel_id = json.loads(answer.body)["kernel"]["id"]
    km = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    return kernel_id, km.provisioner.pid


async def run_in_kernel(jp_serverapp: Any, kernel_id: str, code: str) -> str:
    km = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    client = km.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        out: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])

        await client.execute_interactive(code, output_hook=hook, timeout=60)
        return "".join(out)
    finally:
        client.stop_channels()


async def wait_for(predicate: Any, timeout_s: float = 30) -> None:
    await wait(predicate, timeout_s, "the kernels' attribution")


async def test_a_kernel_and_its_child_process_are_charged_for_their_gpu_share(
    jp_fetch: Any, jp_serverapp: Any, fake_nvml: FakeNvml
) -> None:
    kernel_id, kernel_pid = await start_notebook(jp_fetch, jp_serverapp, "work/train.ipynb")
    # a DataLoader-like worker started by the kernel
    worker = int(
        await run_in_kernel(
            jp_serverapp,
            kernel_id,
            "import subprocess, sys\n"
            "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(w.pid)",
        )
    )
    # the kernel holds 30 GiB, its worker 10 GiB, and a process of no kernel 20 GiB
    import os

    fake_nvml.gpus[0].processes = [
        FakeProcess(kernel_pid, 30 * GIB),
        FakeProcess(worker, 10 * GIB),
        FakeProcess(os.getpid(), 20 * GIB),
    ]

    async def charged() -> bool:
        answer = await get(jp_fetch, "kernels")
        return any(k["id"] == kernel_id and k["cost_usd"] > 0 for k in answer["kernels"])

    await wait_for(charged)
    await asyncio.sleep(1.0)
    answer = await get(jp_fetch, "kernels")
    (k,) = [k for k in answer["kernels"] if k["id"] == kernel_id]
    assert k["notebook_path"] == "work/train.ipynb"
    assert k["name"] == "python3"
    assert k["remote"] is False
    assert kernel_pid in k["pids"]
    assert worker in k["pids"]
    assert k["gpu_share"] == {"0": pytest.approx(40 / 60, abs=1e-6)}
    # this driver gives no per-process samples here: the share was made by memory
    assert k["gpu_share_by"] == {"0": "memory"}
    assert k["memory_bytes"] == 40 * GIB
    assert k["uptime_s"] > 0
    assert answer["pids_visible"] is True
    # two thirds of the used time is the kernel's, a third is not attributed
    micro = answer["micro_usd"]
    kernels = sum(x["cost_micro_usd"] for x in answer["kernels"])
    assert kernels + micro["unattributed"] + micro["idle"] == micro["total"]
    assert answer["unattributed_usd"] > 0
    status = await get(jp_fetch, "status")
    assert status["attribution"] == {"pids_visible": True, "note": None}
    await run_in_kernel(jp_serverapp, kernel_id, "w.kill()")


async def test_a_process_the_samples_leave_out_did_not_compute(
    jp_fetch: Any, jp_serverapp: Any, fake_nvml: FakeNvml
) -> None:
    # as on an H100: the driver's samples name the kernel that computes; a process that
    # holds more memory but has no sample is not charged, whatever its memory
    kernel_id, kernel_pid = await start_notebook(jp_fetch, jp_serverapp, "work/busy.ipynb")
    import os

    fake_nvml.gpus[0].processes = [
        FakeProcess(kernel_pid, 2 * GIB, smUtil=97),
        FakeProcess(os.getpid(), 40 * GIB),
    ]

    async def sampled() -> bool:
        answer = await get(jp_fetch, "kernels")
        return any(
            k["id"] == kernel_id and k["gpu_share_by"] == {"0": "sm_samples"}
            for k in answer["kernels"]
        )

    await wait_for(sampled)
    answer = await get(jp_fetch, "kernels")
    (k,) = [k for k in answer["kernels"] if k["id"] == kernel_id]
    assert k["gpu_share"] == {"0": 1.0}
    assert k["cost_micro_usd"] > 0
    micro = answer["micro_usd"]
    kernels = sum(x["cost_micro_usd"] for x in answer["kernels"])
    assert kernels + micro["unattributed"] + micro["idle"] == micro["total"]


async def test_a_kernels_own_measured_gpu_time_splits_where_there_are_no_samples(
    jp_fetch: Any, jp_serverapp: Any, fake_nvml: FakeNvml
) -> None:
    # a driver with no per-process samples (MIG, some vGPUs): the split was by memory,
    # until the kernel reports a %%gpucost --ops cell with the GPU time it measured
    kernel_id, kernel_pid = await start_notebook(jp_fetch, jp_serverapp, "work/ops.ipynb")
    fake_nvml.gpus[0].processes = [FakeProcess(kernel_pid, 2 * GIB)]

    async def share_by(method: str) -> bool:
        answer = await get(jp_fetch, "kernels")
        return any(
            k["id"] == kernel_id and k["gpu_share_by"] == {"0": method} for k in answer["kernels"]
        )

    await wait_for(lambda: share_by("memory"))
    from datetime import UTC, datetime, timedelta

    ended = datetime.now(UTC)
    record = {
        "cell_id": "ops-cell",
        "kernel_id": kernel_id,
        "started": (ended - timedelta(seconds=2)).isoformat(),
        "ended": ended.isoformat(),
        "wall_s": 2.0,
        "cost_usd": 0.0038,
        "mode": "magic",
        "gpu_span_s": {"0": 2.0},
        "gpu_busy_s": {"0": 1.5},
        "gpu_busy_by": "profiler",
    }
    answer = await jp_fetch("gpucost", "api", "cells", method="POST", body=json.dumps(record))
    assert answer.code == 201
    await wait_for(lambda: share_by("kernel_gpu_time"))
    answer = await get(jp_fetch, "kernels")
    micro = answer["micro_usd"]
    kernels = sum(x["cost_micro_usd"] for x in answer["kernels"])
    assert kernels + micro["unattributed"] + micro["idle"] == micro["total"]


async def test_host_pids_are_reported_not_attributed(
    jp_fetch: Any, jp_serverapp: Any, fake_nvml: FakeNvml
) -> None:
    kernel_id, _ = await start_notebook(jp_fetch, jp_serverapp, "a.ipynb")
    fake_nvml.gpus[0].processes = [FakeProcess(4_000_123, 30 * GIB)]

    async def listed() -> bool:
        answer = await get(jp_fetch, "kernels")
        return not answer["pids_visible"] and any(k["id"] == kernel_id for k in answer["kernels"])

    await wait_for(listed)
    answer = await get(jp_fetch, "kernels")
    assert "container" in answer["note"]
    assert all(k["cost_usd"] == 0 for k in answer["kernels"])
    status = await get(jp_fetch, "status")
    assert status["attribution"]["pids_visible"] is False


async def test_history_and_ledger_totals(jp_fetch: Any, fake_nvml: FakeNvml) -> None:
    await asyncio.sleep(2.5)
    history = await get(jp_fetch, "history", window="15m", step="1s")
    assert history["step_s"] == 1
    assert history["window_s"] == 900
    assert len(history["points"]) >= 2
    point = history["points"][-1]
    assert point["rate_usd_per_hour"] == pytest.approx(3.431)
    assert point["gpus"][0]["utilization_pct"] == 100.0
    assert point["gpus"][0]["power_w"] == pytest.approx(391.2)
    # longer windows are read from the ledger's per-minute rollups
    day = await get(jp_fetch, "history", window="24h")
    assert day["source"] == "ledger"
    assert day["step_s"] >= 60
    assert day["points"]
    assert day["points"][-1]["cost_usd"] > 0
    assert day["totals"]["days"][-1]["cost_usd"] > 0
    (session,) = day["totals"]["sessions"]
    status = await get(jp_fetch, "status")
    assert session["id"] == status["session_id"]
    assert status["ledger"]["enabled"] is True
    # today, this month and all time include this session, live
    assert status["all_time_usd"] >= status["cost_usd"] > 0
    assert status["today_usd"] == pytest.approx(status["cost_usd"], abs=2e-6)
    assert status["co2_g"] == pytest.approx(
        status["energy_j"] / 3.6e6 * status["carbon_intensity_g_per_kwh"], rel=1e-3
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"window": "2h"}, "window='2h' is not one of"),
        ({"window": "1h", "step": "2s"}, "step='2s' is not one of"),
        ({"window": "24h", "step": "5s"}, "too fine for a window over 1h"),
        ({"window": "30d", "step": "1m"}, "more than 2000"),
        ({"window": "15m", "step": "1h"}, "longer than the window"),
    ],
)
async def test_bad_history_parameters_get_a_400_with_a_message(
    jp_fetch: Any, params: dict[str, str], message: str
) -> None:
    with pytest.raises(HTTPClientError) as e:
        await jp_fetch("gpucost", "api", "history", params=params)
    assert e.value.code == 400
    assert message in json.loads(e.value.response.body)["message"]


class TestNoLedger:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        blocker = tmp_path / "blocked"
        blocker.write_text("a file where the ledger's folder should be")
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "ledger_url": f"sqlite:///{blocker / 'ledger.sqlite'}",
        }

    async def test_the_server_runs_on_and_says_why(self, jp_fetch: Any) -> None:
        status = await get(jp_fetch, "status")
        assert status["cost_usd"] >= 0
        assert status["today_usd"] is None
        assert status["month_usd"] is None
        assert status["ledger"]["enabled"] is False
        assert "ledger-unavailable" in [w["code"] for w in status["warnings"]]
        history = await get(jp_fetch, "history", window="15m")
        assert history["source"] == "memory"


async def test_prometheus_metrics_are_scraped_from_the_server(
    jp_fetch: Any,
    jp_serverapp: Any,
    fake_nvml: FakeNvml,
    http_server_client: Any,
    jp_base_url: str,
) -> None:
    kernel_id, kernel_pid = await start_notebook(jp_fetch, jp_serverapp, "m.ipynb")
    fake_nvml.gpus[0].processes = [FakeProcess(kernel_pid, 30 * GIB)]
    fake_nvml.gpus[0].energy_mj += 5_000  # the driver's counter moves on by 5 J

    async def scraped() -> str:
        return (await jp_fetch("metrics")).body.decode()

    async def kernel_series() -> bool:
        return f'kernel_id="{kernel_id}"' in await scraped()

    await wait_for(kernel_series)
    text = await scraped()
    labels = 'gpu="0",modelName="A100-80GB"'
    lines = {line.split(" ")[0]: line.split(" ")[-1] for line in text.splitlines() if line}

    def value(prefix: str) -> float:
        uuid = fake_nvml.gpus[0].uuid
        (found,) = [v for k, v in lines.items() if k.startswith(prefix) and uuid in k]
        return float(found)

    assert value("jupyter_gpucost_gpu_utilization_percent{") == 100.0
    assert value("jupyter_gpucost_gpu_power_watts{") == pytest.approx(391.2)
    assert value("jupyter_gpucost_gpu_hourly_cost_usd{") == pytest.approx(3.431)
    assert value("jupyter_gpucost_gpu_energy_joules_total{") >= 5.0
    assert labels.split(",")[1] in text
    assert 'notebook="m.ipynb"' in text
    assert "jupyter_gpucost_cost_rate_usd_per_hour" in text
    status = await get(jp_fetch, "status")
    session = [k for k in lines if k.startswith("jupyter_gpucost_session_cost_usd{")]
    assert any(status["session_id"] in k for k in session)
    # the metrics need the same credentials as the rest of the server
    with pytest.raises(HTTPClientError) as e:
        await http_server_client.fetch(jp_base_url + "metrics")
    assert e.value.code in (401, 403)
