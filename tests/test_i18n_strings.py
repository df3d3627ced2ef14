# ruff: noqa: RUF001 (Chinese punctuation in the expected sentences)
"""The rest of the server's, kernel's and hub's sentences in the reader's language:
``%gpucost budget``, ``fit`` and ``check``; the training-loop guard's table and its
argument errors; the REST errors of cells, history, the ledger and the export, with JSON's
type words; the API's notes; the hub pages' words for budget scopes, owners and stop
reasons. English stays as it was, and money follows the display rules.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kernel_notebook import run_notebook, text
from tornado.httpclient import HTTPClientError

from jupyter_gpucost.core import i18n
from jupyter_gpucost.core.protocol import ENV_LANGUAGE

HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def chinese() -> Iterator[None]:
    """The server's (or the kernel's) language is Chinese, as JupyterLab's setting sets it."""
    i18n.set_language("zh_CN")
    try:
        yield
    finally:
        i18n.set_language("en")


# -- the kernel: %gpucost budget, fit, check and the guard ---------------------------------


def test_fit_check_budget_and_the_guard_answer_in_the_kernels_language() -> None:
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "%gpucost fit 7B --finetune",
            "%gpucost check",
            "# raises\n%gpucost budget 5",
            "# raises\n%gpucost fit seven",
            "from jupyter_gpucost import guard\n"
            "g = guard(budget_usd=1, total_steps=10, usd_per_hour=3.6, display=False)\n"
            "with g:\n"
            "    g.step()\n"
            "print(g.summary())",
            "# raises\nguard(budget_usd=-1, total_steps=10)",
        ],
        env={ENV_LANGUAGE: "zh_CN"},
    )
    fit = text(nb.cells[1])
    assert fit.startswith("%gpucost fit：7,000,000,000 个参数，bf16，全量微调\n"), fit
    for chinese in ("权重", "梯度", "AdamW 动量", "激活值", "合计", "假设：", "本机没有 GPU"):
        assert chinese in fit, chinese
    for english in ("parameters", "weights", "assumptions", "total", "no GPU here"):
        assert english not in fit, english
    check = text(nb.cells[2])
    assert check.startswith("%gpucost check\n")
    assert "\n  NVIDIA 驱动  " in check
    assert "\n  NVIDIA driver" not in check  # the label (NVML's own reason may quote it)
    for english in ("no mismatch found", "warning:", "note:"):
        assert english not in check, english
    refused = text(nb.cells[3])
    assert "预算由 jupyter-gpucost 服务器扩展管理" in refused
    assert "budgets are kept" not in refused
    assert "'seven' 不是模型规模" in text(nb.cells[4])
    summary = text(nb.cells[5])
    assert summary.startswith("预算守护\n  步数：1 / 10\n"), summary
    for chinese in ("已花费：", "费率："):
        assert chinese in summary, chinese
    for english in ("steps:", "spent:"):
        assert english not in summary, english
    assert "budget_usd 必须大于 0，而不是 -1" in text(nb.cells[6])


class TestTheBudgetMagicInChinese:
    """A real server on simulated GPUs, in yuan, and a kernel it started in Chinese."""

    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "ledger_url": "none",
            "currency_symbol": "¥",
            "budget_grace_s": 600.0,
            "budget_action": "interrupt",
        }

    @pytest.mark.usefixtures("jp_serverapp")
    async def test_budget_set_spent_and_removed(
        self, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import nbformat
        from nbclient import NotebookClient

        monkeypatch.setenv(ENV_LANGUAGE, "zh_CN")  # the kernel inherits the server's
        await asyncio.sleep(0.5)  # the minimum charge is spent from the first sample
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_code_cell(source)
            for source in (
                "%load_ext jupyter_gpucost",
                "%gpucost budget 1234.5",
                "%gpucost",
                "%gpucost budget 0.01",
                "%gpucost budget off",
            )
        ]
        await NotebookClient(nb, timeout=120, kernel_name="python3").async_execute()
        assert text(nb.cells[1]).startswith("gpucost：您的预算现为每会话 ¥1,234.50；目前已花费 ¥0.")
        summary = text(nb.cells[2])
        assert "  预算：已花费 ¥0." in summary
        assert " / 每会话 ¥1,234.50（由您设置）" in summary
        spent = text(nb.cells[3])
        assert spent.startswith("gpucost：您的预算现为每会话 ¥0.01，并且已经用完：目前已花费 ¥0.")
        assert re.search(
            r"服务器已开始倒计时：(10 分 00 秒|9 分 5\d 秒)后，它将保存打开的笔记本，并中断所有内核",
            spent,
        ), spent
        assert "如需撤销：%gpucost budget off，或设置高于 ¥0." in spent
        assert text(nb.cells[4]) == "gpucost：您的预算已移除。\n"
        for cell in nb.cells[1:]:
            assert not re.search(r"\b(budget is|per session|spent so far|countdown)\b", text(cell))


def test_fit_and_check_in_english_are_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_gpucost.kernel.commands.check import Facts, report
    from jupyter_gpucost.kernel.commands.fit import Option, estimate
    from jupyter_gpucost.kernel.commands.fit import report as fit_report

    est = estimate(7_000_000_000, "bf16", finetune=True)
    option = Option("H100", 80 * 10**9, 2, Decimal("2.49"), "aws on-demand")
    text_en = fit_report(est, [], "NVML is not available", [option])
    assert text_en.startswith("%gpucost fit: 7,000,000,000 parameters, bf16, full fine-tuning\n")
    assert "  weights  " in text_en
    assert "2× H100 (160 GB, split across GPUs): from $4.98/h (aws on-demand)" in text_en
    facts = Facts(torch_version="2.13.0+cpu", driver_how="NVML is not available")
    checked = report(facts)
    assert "\n  built with      CPU only\n" in checked
    assert checked.endswith("no mismatch found")


@pytest.mark.usefixtures("chinese")
def test_fit_prices_a_catalog_gpu_by_the_price_rule_in_its_currency() -> None:
    from jupyter_gpucost.kernel.commands.fit import Option, estimate, report

    est = estimate(70_000_000_000, "bf16")
    option = Option("A100-80GB", 80 * 10**9, 2, Decimal("6.98"), "autodl 按需", "¥")
    shown = report(est, [], "NVML 不可用", [option])
    # the price rule (core.money.exact): thousands separated, never a bare '$'
    assert "2× A100-80GB（160 GB，拆分到多个 GPU）：¥13.96/小时起（autodl 按需）" in shown
    assert "$" not in shown


def test_the_budget_reply_in_chinese_and_in_english(chinese: None) -> None:
    from jupyter_gpucost.kernel.commands.budget import budget_reply

    state: dict[str, Any] = {
        "soft": {"amount_usd": 5, "scope": "day", "spent_usd": 0.11},
        "hard": {"amount_usd": 20, "scope": "month"},
    }
    reply = budget_reply(state, "¥")
    # budgets as the status bar writes them (two decimals at least)
    assert reply == (
        "gpucost：您的预算现为每天 ¥5.00；目前已花费 ¥0.11。\n"
        "gpucost：管理员设置的预算（每月 ¥20.00）仍然有效。"
    )
    spent: dict[str, Any] = {
        "soft": {"amount_usd": 0.01, "scope": "session", "spent_usd": 0.11},
        "action": "shutdown",
        "grace": {"reason": "budget", "remaining_s": 65},
    }
    reply = budget_reply(spent, "¥")
    assert "您的预算现为每会话 ¥0.01，并且已经用完：目前已花费 ¥0.11。" in reply
    assert "服务器已开始倒计时：1 分 05 秒后，它将保存打开的笔记本，并关闭所有内核" in reply
    assert "如需撤销：%gpucost budget off，或设置高于 ¥0.11 的预算" in reply
    assert not re.search(r"\b(per|spent|countdown|undo)\b", reply)
    i18n.set_language("en")
    assert budget_reply(spent, "$").splitlines() == [
        "gpucost: your budget is now $0.01 per session, and it is ALREADY SPENT: $0.11 spent "
        "so far.",
        "  The server has started its countdown: in 1 min 05 s it saves the open notebooks and "
        "shuts every kernel down (this one included), which frees their GPU memory.",
        "  To undo: %gpucost budget off, or a budget above $0.11 (%gpucost budget AMOUNT); the "
        "countdown then ends and nothing is stopped.",
    ]


def _summary(**changes: Any) -> Any:
    from jupyter_gpucost.kernel.training.summary import GuardSummary

    figures: dict[str, Any] = {
        "steps": 1200,
        "total_steps": 30000,
        "elapsed_s": 62.25,
        "per_hour": Decimal("3.6"),
        "budget": Decimal("0.5"),
        "spent": Decimal("0.0000004"),
        "seconds_per_step": 0.05,
        "per_step": Decimal("0.00005"),
        "per_1k_tokens": None,
        "projected": Decimal("1.5"),
        "projected_end": datetime(2026, 11, 26, 14, 5, 0),
        "warned": True,
        "stopped": False,
        "currency_symbol": "$",
    }
    figures.update(changes)
    return GuardSummary(**figures)


def test_the_guard_table_writes_money_by_the_display_rules() -> None:
    table = str(_summary())
    assert table.splitlines() == [
        "guard",
        "  steps: 1,200 of 30,000",
        "  time: 62.2 s",
        "  rate: $3.60/h",
        # an amount spent under $0.0001 is not written as '$0.0000004'; a budget has cents
        "  spent: < $0.0001 of $0.50",
        "  per step: 0.0500 s, $0.0000500",
        "  projected: $1.50, ends 2026-11-26 14:05:00",
    ]


@pytest.mark.usefixtures("chinese")
def test_the_guard_table_and_its_errors_in_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_gpucost.kernel.guard import Guard

    monkeypatch.setenv(ENV_LANGUAGE, "zh_CN")  # a guard follows the kernel's language

    table = str(_summary(currency_symbol="¥", stopped=True))
    assert table.splitlines()[0] == "预算守护"
    assert "  已花费：< ¥0.0001 / ¥0.50" in table
    assert "  预计：¥1.50，预计结束于 2026-11-26 14:05:00" in table
    assert "  已停止：再走一步就会超出预算" in table
    with pytest.raises(ValueError, match=r"^total_steps 必须是整数，而不是 2\.5$"):
        Guard(5, 2.5, usd_per_hour=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^budget_usd 必须是金额数字，而不是 'five'$"):
        Guard("five", 10, usd_per_hour=1)


# -- the server's REST errors and notes ---------------------------------------------------


async def _refusal(jp_fetch: Any, method: str, *route: str, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as e:
        await jp_fetch("gpucost", "api", *route, method=method, **kwargs)
    response = e.value.response
    assert response is not None
    return e.value.code, str(json.loads(response.body)["message"])


@pytest.mark.usefixtures("jp_serverapp", "chinese")
async def test_rest_errors_of_cells_history_and_exports_are_in_chinese(
    jp_fetch: Any, jp_root_dir: Path
) -> None:
    cell = {
        "cell_id": "c1",
        "started": "2026-11-26T10:00:00+00:00",
        "ended": "2026-11-26T10:00:01+00:00",
        "wall_s": "1",
        "cost_usd": 0.1,
    }
    assert await _refusal(jp_fetch, "POST", "cells", body=json.dumps(cell)) == (
        400,
        "wall_s 必须是有限的数字，而不是字符串",
    )
    cell["wall_s"] = 1
    del cell["cost_usd"]
    assert await _refusal(jp_fetch, "POST", "cells", body=json.dumps(cell)) == (
        400,
        "cost_usd 为必填项",
    )
    assert await _refusal(jp_fetch, "POST", "cells", body="[1]") == (
        400,
        "请求体必须是 JSON 对象，而不是数组",
    )
    cell.update(cost_usd=0.1, started="0001-01-01T00:00:00+00:00")
    status, message = await _refusal(jp_fetch, "POST", "cells", body=json.dumps(cell))
    assert status == 400
    assert message.startswith("started 必须是 2000-01-01 至一天后（")
    assert await _refusal(jp_fetch, "GET", "history", params={"window": "2h"}) == (
        400,
        "window='2h' 不是 15m, 1h, 6h, 24h, 7d, 30d 之一",
    )
    assert await _refusal(jp_fetch, "GET", "cells", params={"limit": "0"}) == (
        400,
        "limit 必须是 1 到 500 之间的整数，而不是 '0'",
    )
    body = json.dumps({"paths": ["50%%.pt"]})
    assert await _refusal(jp_fetch, "POST", "exports", body=body) == (404, "'50%%.pt' 不存在")
    (jp_root_dir / "empty").mkdir()
    body = json.dumps({"paths": ["empty"]})
    assert await _refusal(jp_fetch, "POST", "exports", body=body) == (
        400,
        "'empty' 是空文件夹：没有可导出的内容",
    )
    body = json.dumps({"paths": ["a.pt"], "target": "s3://bucket/x"})
    status, message = await _refusal(jp_fetch, "POST", "exports", body=body)
    assert status == 403  # refused by its kind, whatever the language says
    assert message.startswith("只能导出到已配置的目标（local）")


@pytest.mark.usefixtures("jp_serverapp", "chinese")
async def test_the_budgets_remaining_refusals_are_in_chinese(jp_fetch: Any) -> None:
    body = json.dumps({"amount_usd": 1, "scope": "week"})
    assert await _refusal(jp_fetch, "PUT", "budget", body=body) == (
        400,
        "scope 必须是 session, day, month 之一，而不是 'week'",
    )
    body = json.dumps({"hard_usd": 1})
    status, message = await _refusal(jp_fetch, "PUT", "budget", body=body)
    assert (status, message.split("（")[0]) == (403, "硬预算由管理员设置")
    body = json.dumps({"amount_usd": 1, "limit": 2})
    assert await _refusal(jp_fetch, "PUT", "budget", body=body) == (
        400,
        "未知字段 limit：请发送 amount_usd 和 scope",
    )
    body = json.dumps({"amount": 1, "amount_usd": 2})
    assert await _refusal(jp_fetch, "PUT", "budget", body=body) == (
        400,
        "amount 和 amount_usd 是同一金额的两个名称，但两者不同（1 和 2）：请只发送其中一个",
    )
    body = json.dumps({"action": "reboot"})
    status, message = await _refusal(jp_fetch, "POST", "budget", "stop", body=body)
    assert (status, message.split(" 之一")[0]) == (
        400,
        "action 必须是 interrupt, shutdown, stop-server, stop-instance",
    )


@pytest.mark.usefixtures("jp_serverapp")
async def test_rest_errors_in_english_keep_their_words(jp_fetch: Any) -> None:
    cell = {"cell_id": "c1", "started": "x", "ended": "x", "wall_s": [1], "cost_usd": 0.1}
    assert await _refusal(jp_fetch, "POST", "cells", body=json.dumps(cell)) == (
        400,
        "started must be an ISO 8601 time, not 'x'",
    )
    cell.update(started="2026-11-26T10:00:00+00:00", ended="2026-11-26T10:00:01+00:00")
    assert await _refusal(jp_fetch, "POST", "cells", body=json.dumps(cell)) == (
        400,
        "wall_s must be a finite number, not an array",
    )
    body = json.dumps({"paths": ["a.pt"], "target": "s3://bucket/x"})
    status, message = await _refusal(jp_fetch, "POST", "exports", body=body)
    assert (status, message.split(" (")[0]) == (403, "exports go to configured targets only")


@pytest.mark.usefixtures("jp_serverapp", "chinese")
async def test_the_simulated_telemetry_note_is_in_the_servers_language(jp_fetch: Any) -> None:
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        kernels = json.loads((await jp_fetch("gpucost", "api", "kernels")).body)
        if kernels["note"] is not None:
            break
        assert asyncio.get_running_loop().time() < deadline, "no attribution in 30 s"
        await asyncio.sleep(0.2)
    assert kernels["note"] == "模拟遥测：录制会话的 GPU 进程归属到运行最久的内核。"
    status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
    assert status["attribution"]["note"] == kernels["note"]
    # too early for advice: said in Chinese, not English
    assert HAN.search(status["rightsizing_note"] or "现"), status["rightsizing_note"]
    assert "Too early" not in (status["rightsizing_note"] or "")
    i18n.set_language("en")
    kernels = json.loads((await jp_fetch("gpucost", "api", "kernels")).body)
    assert kernels["note"].startswith("Simulated telemetry: the recorded session's GPU")


def test_json_type_words_in_both_languages(chinese: None) -> None:
    from jupyter_gpucost.server.inputs import json_kind, type_name

    values: list[object] = [None, True, 1.5, "x", [1], {"a": 1}]
    assert [json_kind(v) for v in values] == [
        "null",
        "boolean",
        "number",
        "string",
        "array",
        "object",
    ]
    assert [type_name(v) for v in values] == ["null", "布尔值", "数字", "字符串", "数组", "对象"]
    i18n.set_language("en")
    assert [type_name(v) for v in values] == [
        "null",
        "a boolean",
        "a number",
        "a string",
        "an array",
        "an object",
    ]


# -- the hub pages' words from data ----------------------------------------------------------


def _server(**changes: Any) -> dict[str, Any]:
    server: dict[str, Any] = {
        "server_name": "",
        "gpus": "1 × T4",
        "usd_per_hour": 0.35,
        "stop_at": "2026-11-26T10:05:00+00:00",
        "reason": "Your day budget of $20.00 (set by your hub admin) is spent: $20.41 today.",
        "budgets": [
            {
                "scope": "day",
                "source": "user",
                "amount_usd": 20.0,
                "spent_usd": 20.41,
                "share": 1.0205,
                "exceeded": True,
            },
            {
                "scope": "month",
                "source": "group:ml",
                "amount_usd": 500.0,
                "spent_usd": 120.0,
                "share": 0.24,
                "exceeded": False,
            },
        ],
    }
    server.update(changes)
    return server


def _user_page(language: str, **changes: Any) -> str:
    from jupyter_gpucost.hub.web.handlers import render, templates
    from jupyter_gpucost.hub.web.views import bars

    messages = i18n.messages_for(language)
    server = _server(**changes)
    data = {
        "user": "alice",
        "today_usd": 20.41,
        "month_usd": 120.0,
        "running": [server],
        "budgets": server["budgets"],
        "sessions": [
            {
                "server_name": "",
                "started": "2026-11-26T09:00:00",
                "stopped": None,
                "profile": "",
                "gpus": "no GPU",
                "gpu_model": None,
                "gpu_count": 0,
                "reported_usd": None,
                "bill_usd": 0.0,
            }
        ],
        "daily": [],
    }
    # the page as the service renders it (PageBase.render_page), JupyterHub's page.html
    # around it
    return render(
        templates("$"),
        "gpucost_user.html",
        messages,
        "$",
        hub_prefix="/hub/",
        service_url="/services/gpucost/",
        user="alice",
        is_admin=False,
        xsrf_token="x",
        data=data,
        chart=bars([]),
    )


def test_the_hub_pages_write_budget_scopes_owners_and_stop_reasons_in_chinese() -> None:
    from jupyter_gpucost.hub.web.page_words import page_words, stop_reason

    words = page_words(i18n.messages_for("zh_CN"), "¥")
    assert words["scope_name"]("day") == "每日预算"
    assert words["hub_source"]("user") == "个人"
    assert words["hub_source"]("group:ml") == "ml 组"
    assert stop_reason(_server(), i18n.messages_for("zh_CN"), "¥") == (
        "您的每日预算 ¥20.00（由您的 Hub 管理员设置）已用完：今天已花费 ¥20.41。"
    )
    # in English, the sentence the service keeps for its deadline
    assert stop_reason(_server(), i18n.messages_for("en")) == _server()["reason"]
    # a deadline kept from before a restart, with no budget over any more: its own words
    assert stop_reason(_server(budgets=[]), i18n.messages_for("zh_CN")) == _server()["reason"]
    page = _user_page("zh_CN")
    # dollars as a Chinese reader's JupyterLab writes them (Intl's zh symbol): US$
    assert "每日预算（个人）：已花费 US$20.41 / US$20.00" in page
    assert "每月预算（ml 组）：" in page
    assert "已用完：今天已花费 US$20.41。" in page
    assert "无 GPU" in page
    for english in ("day (user)", "(group:ml)", "is spent:", ">no GPU<"):
        assert english not in page, english


def test_the_user_page_writes_a_budget_by_the_budget_rule() -> None:
    small = {
        "scope": "day",
        "source": "user",
        "amount_usd": 0.05,
        "spent_usd": 0.0042,
        "share": 0.084,
        "exceeded": False,
    }
    page = _user_page("en", budgets=[small])
    # spent by size, the budget as it was set: never "$0.0500"
    assert "$0.0042 of $0.05" in page
    assert "$0.0500" not in page
