"""Stop when done: ``%gpucost stop-when-done`` in a notebook, and the user's own stop
(``POST``/``DELETE /gpucost/api/budget/stop``) with a budget stop's countdown and cancel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from kernel_notebook import text
from test_budget_api import budget, put, refused, wait_for
from test_kernel_link import run_async


def config(tmp_path: Path, grace_s: float) -> dict[str, object]:
    return {
        "telemetry": "simulated",
        "sample_interval_s": 0.2,
        "budget_grace_s": grace_s,
        "budget_save_timeout_s": 1,
        "budget_state_path": str(tmp_path / "budget.json"),
        "ledger_url": "none",
    }


class TestCountdownAndCancel:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        return config(tmp_path, 600)

    async def test_the_cell_s_end_starts_a_countdown_the_user_can_cancel(
        self, jp_fetch: Any
    ) -> None:
        nb = await run_async(
            [
                "%load_ext jupyter_gpucost",
                "%gpucost stop-when-done --action shutdown\nimport time\ntime.sleep(0.3)",
                "x = 1",
            ]
        )
        said = text(nb.cells[1])
        assert "when this cell ends (finished or failed): save, export, then shutdown" in said
        assert "gpucost: stopping at " in said
        # it fired once: the next cell asked for nothing more
        assert text(nb.cells[2]) == ""
        state = await budget(jp_fetch)
        assert state["state"] == "grace"
        assert state["grace"]["reason"] == "done"
        assert state["grace"]["action"] == "shutdown"
        assert state["grace"]["can_cancel"] is True
        cancelled = json.loads(
            (await jp_fetch("gpucost", "api", "budget", "stop", method="DELETE")).body
        )
        assert cancelled["state"] != "grace"
        message = await refused(jp_fetch("gpucost", "api", "budget", "stop", method="DELETE"), 409)
        assert "no countdown of yours" in message

    async def test_a_guarded_training_loop_asks_to_stop_when_it_ends(self, jp_fetch: Any) -> None:
        nb = await run_async(
            [
                "from jupyter_gpucost import guard\n"
                "with guard(5, 10, usd_per_hour=1, display=False,"
                " stop_when_done='stop-instance') as g:\n"
                "    for _ in range(3):\n"
                "        g.step()",
            ]
        )
        assert "gpucost: stopping at " in text(nb.cells[0])
        grace = (await budget(jp_fetch))["grace"]
        assert grace["reason"] == "done"
        assert grace["action"] == "stop-instance"

    async def test_from_the_panel_it_waits_for_the_busy_kernel_to_end(
        self, jp_fetch: Any, jp_serverapp: Any
    ) -> None:
        km = jp_serverapp.kernel_manager
        kid = await km.start_kernel(kernel_name="python3")
        client = km.get_kernel(kid).client()
        client.start_channels()
        try:
            await asyncio.wait_for(client._async_wait_for_ready(), 60)
            client.execute("import time; time.sleep(4)")

            async def busy() -> bool:
                return bool(km.get_kernel(kid).execution_state == "busy")

            await wait_for(busy, 20, "the kernel to be busy")
            body = json.dumps({"action": "stop-instance", "reason": "done", "when": "idle"})
            await jp_fetch("gpucost", "api", "budget", "stop", method="POST", body=body)
            # while the kernel works, nothing counts down: the stop waits
            await asyncio.sleep(1.5)
            state = await budget(jp_fetch)
            assert state["state"] != "grace"
            assert state["stop_when_idle"] == {"action": "stop-instance"}

            async def counting_down() -> bool:
                return (await budget(jp_fetch))["state"] == "grace"

            await wait_for(counting_down, 30, "the countdown once the kernel is done")
            grace = (await budget(jp_fetch))["grace"]
            assert grace["reason"] == "done"
            assert grace["action"] == "stop-instance"
            assert (await budget(jp_fetch))["stop_when_idle"] is None
        finally:
            client.stop_channels()
            await km.shutdown_kernel(kid)

    async def test_a_manual_stop_is_named_as_such_and_offers_no_raise(self, jp_fetch: Any) -> None:
        # a budget of one's own, barely touched: "Stop server" is not a spent budget
        await put(jp_fetch, {"amount_usd": 1000, "scope": "session"})
        body = json.dumps({"action": "stop-server", "reason": "user"})
        started = json.loads(
            (await jp_fetch("gpucost", "api", "budget", "stop", method="POST", body=body)).body
        )
        assert started["state"] == "grace"
        assert started["reason"] == "user"
        grace = started["grace"]
        assert grace["reason"] == "user"
        assert grace["can_raise"] is False
        assert grace["can_cancel"] is True
        # the budget's own plan stands: it does not stop at $1,000 when the countdown ends
        stop = started["stop"]
        assert stop["amount_usd"] == 1000
        assert stop["in_s"] > 3600
        assert stop["action"] != "stop-server"
        assert "server stopped" not in stop["text"]
        await jp_fetch("gpucost", "api", "budget", "stop", method="DELETE")
        assert (await budget(jp_fetch))["reason"] is None

    async def test_a_stop_request_is_checked(self, jp_fetch: Any) -> None:
        message = await refused(
            jp_fetch("gpucost", "api", "budget", "stop", method="POST", body='{"action": "nuke"}'),
            400,
        )
        assert "action must be one of" in message


class TestStoppedWhenDone:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        return config(tmp_path, 0)

    async def test_a_failed_cell_saves_and_stops_and_says_what_still_costs(
        self, jp_fetch: Any
    ) -> None:
        nb = await run_async(
            [
                "%load_ext jupyter_gpucost",
                "%gpucost stop-when-done --action shutdown\nraise ValueError('diverged')  # raises",
            ]
        )
        assert "the cell failed" in text(nb.cells[1])

        # the action is kept as the last one; the state is "acted" only until the next
        # check finds nothing more to do (on a busy machine, before the notebook returns)
        async def acted() -> bool:
            return bool((await budget(jp_fetch)).get("last_action"))

        await wait_for(acted, 60, "the stop when done")
        last = (await budget(jp_fetch))["last_action"]
        assert last["reason"] == "done"
        assert last["action"] == "shutdown"
        assert last["message"].startswith("stopped when done at ")
        # 2 simulated A100s: the kernels stopped, the machine did not
        assert last["message"].endswith("this machine still costs $6.86/h")


def test_stop_when_done_answers_in_the_kernel_s_language(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from IPython.core.error import UsageError

    from jupyter_gpucost.core import i18n
    from jupyter_gpucost.kernel import link as kernel_link
    from jupyter_gpucost.kernel.stop_when_done import stop_when_done

    # a kernel with no jupyter-gpucost server
    monkeypatch.setattr(kernel_link, "_link", None)
    monkeypatch.setattr(kernel_link, "_checked", True)
    i18n.set_language("zh_CN")  # as the server hands the kernel its language
    try:
        stop_when_done(object(), ["off"])  # type: ignore[arg-type]
        assert capsys.readouterr().out == "gpucost：此单元格结束时不会停止任何内容。\n"  # noqa: RUF001
        with pytest.raises(UsageError) as refused_here:
            stop_when_done(object(), ["on"])  # type: ignore[arg-type]
        assert str(refused_here.value).startswith("停止由 jupyter-gpucost 服务器扩展执行")
    finally:
        i18n.set_language("en")
    stop_when_done(object(), ["off"])  # type: ignore[arg-type]
    assert capsys.readouterr().out == "gpucost: nothing will be stopped when this cell ends.\n"
