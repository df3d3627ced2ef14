# ruff: noqa: RUF001 (Chinese punctuation in the expected sentences)
"""The server's, kernel's and hub's own sentences in Chinese when the language is Chinese
(and the same English sentences as before when it is English)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from decimal import Decimal

import pytest

from jupyter_gpucost.core import i18n
from jupyter_gpucost.server.budget import messages
from jupyter_gpucost.server.budget.policy import Budget
from jupyter_gpucost.server.budget.record import ActionRecord, BudgetFigures

#: the token the front end finds and writes in the browser's local time (format.ts)
UTC_TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})? UTC\b")
HAN = re.compile(r"[\u4e00-\u9fff]")

RECORD = ActionRecord(
    at="2026-11-22T14:02:03Z",
    reason="budget",
    action="shutdown",
    notebooks_saved=2,
    budget=BudgetFigures("hard", "session", 5_000_000, 5_012_345),
)


@pytest.fixture
def chinese() -> Iterator[None]:
    i18n.set_language("zh_CN")
    try:
        yield
    finally:
        i18n.set_language("en")


@pytest.mark.usefixtures("chinese")
def test_the_budget_action_summary_and_outcomes_are_in_chinese_with_the_utc_time_kept() -> None:
    # the session's symbol for yuan (CN¥), written as a Chinese reader knows it (¥)
    text = messages.summary(RECORD, "CN¥")
    assert text == "已于 14:02 UTC 因 ¥5.00 预算用完而停止；已保存 2 个笔记本"
    assert UTC_TIME.search(text)
    for reason in ("hub", "done", "user", "idle"):
        other = messages.summary(
            ActionRecord(at=RECORD.at, reason=reason, action="shutdown"), "CN¥"
        )
        assert UTC_TIME.search(other)
        assert HAN.search(other)
        assert "stopped" not in other
    acted = messages.kernels_acted(text, "shutdown", 1)
    assert acted.endswith("；已关闭 1 个内核")
    assert messages.server_stopped(text).endswith("；服务器已停止")
    stopped = messages.instance_stopped(text, 1, "EC2 is stopping i-0abc")
    assert stopped.endswith("；机器正在停止（EC2 is stopping i-0abc）；其磁盘仍在计费")
    failed = messages.instance_failed(text, messages.no_instance_stopper())
    assert "无法停止机器" in failed
    assert "stop this" not in failed
    still = messages.with_still_cost(text, Decimal("6.86"), "CN¥")
    assert still.endswith("；这台机器仍在计费 ¥6.86/小时")
    # dollars as the status bar writes them in Chinese: US$ (Intl.NumberFormat's rule)
    dollars = messages.with_still_cost(messages.summary(RECORD, "$"), Decimal("6.86"), "$")
    assert "因 US$5.00 预算用完而停止" in dollars
    assert dollars.endswith("；这台机器仍在计费 US$6.86/小时")


@pytest.mark.usefixtures("chinese")
def test_the_countdown_stop_reasons_and_notices_are_in_chinese() -> None:
    assert messages.cleared(messages.YOU_CANCELLED) == "倒计时已停止：您已取消。"
    assert messages.cleared("the budget is no longer spent") == "倒计时已停止：预算已不再用完。"
    for notice in (messages.SAVE_REQUEST, messages.IDLE_SKIPPED, messages.IDLE_SKIPPED_RECORD):
        assert HAN.search(i18n._(notice))


@pytest.mark.usefixtures("chinese")
def test_where_a_locked_budget_comes_from_is_said_in_chinese() -> None:
    from jupyter_gpucost.core.hub_protocol import HUB_SOURCE_LABEL
    from jupyter_gpucost.server.budget.sources import CONFIG_LABEL, SPAWNER_LABEL

    for label in (HUB_SOURCE_LABEL, CONFIG_LABEL, SPAWNER_LABEL):
        assert HAN.search(i18n._(label)), label
    hub_day = Budget("hub", 1_000_000, "day", HUB_SOURCE_LABEL, "user")
    assert messages.scope_name(hub_day) == "由您的 Hub 管理员设置的每日预算"


def test_in_english_the_sentences_are_as_before() -> None:
    text = messages.summary(RECORD, "$")
    assert text == "stopped at $5.00 budget at 14:02 UTC; 2 notebooks saved"
    assert messages.server_stopped(text) == f"{text}; server stopped"
    assert messages.instance_failed(text, "x") == (
        f"{text}; could not stop the machine (x); server stopped instead"
    )
    assert messages.with_still_cost(text, Decimal("6.86"), "$").endswith(
        "; this machine still costs $6.86/h"
    )
    assert messages.cleared(messages.YOU_CANCELLED) == "Countdown stopped: you cancelled it."
    hub_day = Budget("hub", 1_000_000, "day", "set by your hub admin", "user")
    assert messages.scope_name(hub_day) == "daily budget set by your hub admin"


@pytest.mark.usefixtures("chinese")
def test_the_errors_a_person_reads_are_in_chinese() -> None:
    from jupyter_gpucost.core.refusal import Refusal
    from jupyter_gpucost.server.budget.parse import parse_soft_request
    from jupyter_gpucost.server.budget.policy import BudgetError
    from jupyter_gpucost.server.inputs import json_object

    with pytest.raises(BudgetError, match=r"^预算必须大于 0"):
        parse_soft_request({"amount_usd": 0})
    with pytest.raises(BudgetError, match=r"^预算的小数超过 6 位$"):
        parse_soft_request({"amount_usd": "1.0000001"})
    with pytest.raises(Refusal, match=r"^请求体必须是 JSON$"):
        json_object(b"{")


def test_in_english_the_errors_are_as_before() -> None:
    from jupyter_gpucost.server.budget.parse import parse_soft_request
    from jupyter_gpucost.server.budget.policy import BudgetError

    with pytest.raises(BudgetError, match=r"^The budget must be more than 0 \(remove"):
        parse_soft_request({"amount_usd": 0})


def test_the_server_hands_jupyterlabs_language_to_the_kernels_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import logging

    from jupyterlab_server.translation_utils import translator

    from jupyter_gpucost.core.protocol import ENV_LANGUAGE
    from jupyter_gpucost.kernel.link import follow_server_language
    from jupyter_gpucost.server.translations import follow_jupyterlab_language

    monkeypatch.setenv(ENV_LANGUAGE, "")  # restored (removed) after the test
    assert follow_jupyterlab_language(logging.getLogger("test"))
    try:
        translator.set_locale("zh_CN")
        assert os.environ[ENV_LANGUAGE] == "zh_CN"
        i18n.set_language("en")
        assert follow_server_language() == "zh_CN"
        translator.set_locale("fr_FR")
        assert os.environ[ENV_LANGUAGE] == "en"
    finally:
        translator.set_locale("en")
        i18n.set_language("en")
    assert follow_server_language({}) == "en"


def test_the_hub_pages_follow_the_browsers_accept_language() -> None:
    assert i18n.accept_language("zh-CN,zh;q=0.9,en;q=0.8") == "zh_CN"
    assert i18n.accept_language("zh-TW") == "zh_CN"
    assert i18n.accept_language("en-US,en;q=0.9,zh;q=0.8") == "en"
    assert i18n.accept_language("fr-FR,zh;q=0.5") == "zh_CN"
    assert i18n.accept_language("de, fr;q=0.8") == "en"
    assert i18n.accept_language("zh;q=0, en") == "en"
    assert i18n.accept_language("") == "en"
