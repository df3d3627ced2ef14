"""Per-kernel cost inside a container, through a real Jupyter server and real kernels.

NVML answers as it does in a container (``container_gpu``: host pids, another tenant on the
same GPU, the H100's one-dominant-process samples); each kernel runs the real kernel-side
extension with a stand-in for the CUDA driver (``cuda_standin``), identifies its own GPU
process through the server's probe routes, and the recorded two-kernel H100 session is
replayed with the kernels' host pids.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from container_gpu import OFFSET, ContainerNvml
from nvml_replay import load, replay_step

from jupyter_gpucost.core.protocol import ENV_TOKEN, GPU_PROBES_PATH, gpu_probe_signature
from jupyter_gpucost.server.gpu_use.gpu_claims import SIZE_CHOICES

GIB = 2**30
TESTS = Path(__file__).parent
#: another container's processes on the same GPU: one holds memory, one will compute
HOLDER, TENANT = 4_100_001, 4_100_002


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ContainerNvml:
    state = tmp_path / "gpu-state"
    state.mkdir()
    fake = ContainerNvml(state, tenants={HOLDER: 20 * GIB, TENANT: 2 * GIB})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    return fake


@pytest.fixture
def gpucost_config(nvml: ContainerNvml, tmp_path: Path) -> dict[str, object]:
    return {
        "telemetry": "nvml",
        "sample_interval_s": 0.2,
        "minimum_charge_s": 0,
        "ledger_url": "none",
    }


async def kernels(jp_fetch: Any) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads((await jp_fetch("gpucost", "api", "kernels")).body)
    return answer


async def start_kernel(jp_fetch: Any, jp_serverapp: Any, path: str) -> tuple[str, int]:
    answer = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps({"path": path, "type": "notebook", "kernel": {"name": "python3"}}),
    )
    kernel_id = json.loads(answer.body)["kernel"]["id"]
    pid = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.pid
    return kernel_id, int(pid)


async def run(jp_serverapp: Any, kernel_id: str, code: str) -> str:
    client = jp_serverapp.kernel_manager.get_kernel(kernel_id).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        out: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        await client.execute_interactive(code, output_hook=hook, timeout=60)
        return "".join(out)
    finally:
        client.stop_channels()


def with_cuda(nvml: ContainerNvml, context_bytes: int) -> str:
    """A cell that loads the extension and creates "a CUDA context" in the kernel."""
    return (
        f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
        "import cuda_standin\n"
        "get_ipython().run_line_magic('load_ext', 'jupyter_gpucost')\n"
        "identity = get_ipython().gpucost_identity\n"
        f"identity.cuda = cuda_standin.FakeCuda({str(nvml.state_dir)!r}, {nvml.uuid!r}, "
        f"{context_bytes})\n"
        "print('ready')\n"
    )


async def until(predicate: Any, timeout_s: float = 30.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await predicate()
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.2)


async def identified(jp_fetch: Any, kernel_id: str, host_pid: int) -> bool:
    answer = await kernels(jp_fetch)
    row = [k for k in answer["kernels"] if k["id"] == kernel_id]
    return bool(row) and row[0]["gpu_host_pids"] == {"0": [host_pid]}


def exact(answer: dict[str, Any]) -> None:
    micro = answer["micro_usd"]
    kernel_sum = sum(k["cost_micro_usd"] for k in answer["kernels"])
    assert kernel_sum + micro["unattributed"] + micro["idle"] == micro["total"]


async def replay(nvml: ContainerNvml, records: list[dict[str, Any]], pids: dict[int, int]) -> None:
    for record in records:
        replay_step(nvml, record, pids)
        await asyncio.sleep(0.1)


def tenant_phase(records: list[dict[str, Any]], busy_pid: int) -> list[dict[str, Any]]:
    """The recorded busy phase as another tenant's: the same answers, its pid dominant."""
    out = []
    for record in records:
        if record["util"] < 90 or not isinstance(record["proc_util"], list):
            continue
        copy = dict(record)
        copy["proc_util"] = [
            [TENANT if int(e[0]) == busy_pid else int(e[0]), *e[1:]] for e in record["proc_util"]
        ]
        out.append(copy)
    return out


def idle_gap(record: dict[str, Any], n: int) -> list[dict[str, Any]]:
    return [dict(record, util=0, proc_util="NVMLError_NotFound: Not Found")] * n


def shifted(records: list[dict[str, Any]], by_us: int) -> list[dict[str, Any]]:
    """The records as if replayed ``by_us`` later: the driver's sample stamps move on (a
    caller passes the last stamp it saw, so an older stamp would be no new sample)."""
    out = []
    for record in records:
        copy = dict(record)
        if isinstance(record["proc_util"], list):
            copy["proc_util"] = [[*e[:3], int(e[3]) + by_us] for e in record["proc_util"]]
        out.append(copy)
    return out


async def test_kernels_in_a_container_identify_their_gpu_process_and_pay_their_share(
    jp_fetch: Any, jp_serverapp: Any, nvml: ContainerNvml
) -> None:
    data = load("two-kernels-session.json")
    records: list[dict[str, Any]] = data["records"]
    recorded = {name: int(pid) for name, pid in data["kernel_pids"].items()}
    stamps = [
        int(e[3]) for r in records if isinstance(r["proc_util"], list) for e in r["proc_util"]
    ]
    #: each replay after the first runs this much later in the driver's clock
    later = max(stamps) - min(stamps) + 1_000_000

    # -- one kernel: it identifies its process; the tenants' stay nobody's ---------------
    busy_id, busy_pid = await start_kernel(jp_fetch, jp_serverapp, "train.ipynb")
    assert "ready" in await run(jp_serverapp, busy_id, with_cuda(nvml, 1184890880))
    await until(lambda: identified(jp_fetch, busy_id, busy_pid + OFFSET))
    answer = await kernels(jp_fetch)
    assert answer["pids_visible"] is False  # NVML's pids are not the server's
    assert {p["host_pid"] for p in answer["other_processes"]} == {HOLDER, TENANT}
    # a short stretch of the recorded busy phase, the busy kernel alone on the GPU
    only_busy = {recorded["busy"]: busy_pid + OFFSET}
    busy_records = [
        dict(r, procs=[p for p in r["procs"] if int(p[0]) == recorded["busy"]])
        for r in records
        if r["util"] >= 90
    ][:10]
    await replay(nvml, [*busy_records, *idle_gap(busy_records[-1], 5)], only_busy)
    await asyncio.sleep(0.6)
    answer = await kernels(jp_fetch)
    exact(answer)
    (row,) = answer["kernels"]
    assert row["cost_micro_usd"] > 0
    assert row["gpu_share_by"] == {"0": "sm_samples"}

    # -- two kernels: the recorded session, then another tenant computes --------------------
    idle_id, idle_pid = await start_kernel(jp_fetch, jp_serverapp, "explore.ipynb")
    assert "ready" in await run(jp_serverapp, idle_id, with_cuda(nvml, 9229565952))
    await until(lambda: identified(jp_fetch, idle_id, idle_pid + OFFSET))
    before = {k["id"]: k["cost_micro_usd"] for k in (await kernels(jp_fetch))["kernels"]}
    pids = {recorded["busy"]: busy_pid + OFFSET, recorded["idle"]: idle_pid + OFFSET}
    await replay(nvml, [*shifted(records, later), *idle_gap(records[-1], 5)], pids)
    await asyncio.sleep(0.6)
    mid = await kernels(jp_fetch)
    exact(mid)
    costs = {k["id"]: k["cost_micro_usd"] - before[k["id"]] for k in mid["kernels"]}
    # the busy kernel pays for the session's GPU time (the memory split gave it 11 %)
    assert costs[busy_id] > 0
    assert costs[busy_id] >= 0.95 * (costs[busy_id] + costs[idle_id])

    tenant = shifted(tenant_phase(records, recorded["busy"]), 2 * later)
    await replay(nvml, [*tenant, *idle_gap(records[-1], 5)], pids)
    await asyncio.sleep(0.6)
    end = await kernels(jp_fetch)
    exact(end)
    # the other tenant computed: the session's GPU cost grew, the kernels' did not
    grew = end["micro_usd"]["unattributed"] - mid["micro_usd"]["unattributed"]
    assert grew > 0
    for k in end["kernels"]:
        then = next(m["cost_micro_usd"] for m in mid["kernels"] if m["id"] == k["id"])
        assert abs(k["cost_micro_usd"] - then) <= 1  # largest-remainder rounding only
    shown = {p["host_pid"] for p in end["other_processes"]}
    assert shown == {HOLDER, TENANT}
    assert "host pids" in (end["note"] or "")


async def test_the_probe_routes_take_a_kernels_word_for_nothing(
    jp_fetch: Any, jp_serverapp: Any, http_server_client: Any, jp_base_url: str, nvml: ContainerNvml
) -> None:
    kernel_id, _ = await start_kernel(jp_fetch, jp_serverapp, "a.ipynb")
    key = jp_serverapp.kernel_manager.get_kernel(kernel_id).session.key
    await asyncio.sleep(0.5)  # the URL and token are published once the server listens
    headers = {"Authorization": f"token {os.environ[ENV_TOKEN]}"}
    url = f"{jp_base_url}{GPU_PROBES_PATH}"

    async def post(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        answer = await http_server_client.fetch(
            path, method="POST", body=json.dumps(body), headers=headers, raise_error=False
        )
        return answer.code, json.loads(answer.body)

    other_key = b"not-this-kernels-key"
    for body, code in [
        # signed with another key: whoever sent it is not that kernel
        (
            {
                "kernel_id": kernel_id,
                "gpu_uuid": nvml.uuid,
                "signature": gpu_probe_signature(other_key, kernel_id, nvml.uuid),
            },
            403,
        ),
        (
            {
                "kernel_id": "no-such-kernel",
                "gpu_uuid": nvml.uuid,
                "signature": gpu_probe_signature(key, "no-such-kernel", nvml.uuid),
            },
            404,
        ),
        (
            {
                "kernel_id": kernel_id,
                "gpu_uuid": "GPU-not-here",
                "signature": gpu_probe_signature(key, kernel_id, "GPU-not-here"),
            },
            404,
        ),
        ({"kernel_id": kernel_id, "gpu_uuid": nvml.uuid, "signature": 7}, 400),
        # a kernel never names a pid: a field it adds changes nothing
        (
            {
                "kernel_id": kernel_id,
                "gpu_uuid": nvml.uuid,
                "host_pid": HOLDER,
                "signature": gpu_probe_signature(key, kernel_id, nvml.uuid),
            },
            201,
        ),
    ]:
        status, answer = await post(url, body)
        assert status == code, (body, answer)
    assert answer["state"] == "armed"
    assert answer["host_pid"] is None
    assert answer["size_bytes"] in SIZE_CHOICES
    status, refused = await post(f"{url}/{answer['probe_id']}", {"step": "sideways"})
    assert status == 400
    assert "step" in refused["message"]
    status, _ = await post(f"{url}/guessed-id", {"step": "held"})
    assert status == 404
    listed = await kernels(jp_fetch)
    assert all(k["gpu_host_pids"] == {} for k in listed["kernels"])
