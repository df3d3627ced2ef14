"""Hub budgets per user and per group, what they say to the user, and the grace before
the hub stops a server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from jupyter_gpucost.core.hub_protocol import HubBudget
from jupyter_gpucost.hub.budgets import (
    HubBudgetPolicy,
    describe,
    exceeded,
    spawn_refusal,
    to_micro_usd,
)
from jupyter_gpucost.hub.enforcer import HubEnforcer, Weighed
from jupyter_gpucost.hub.model import GroupTotals, HubConfigError, UserTotals

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
USD = 1_000_000


def totals(user: str, today_usd: float, month_usd: float) -> UserTotals:
    return UserTotals(user, int(today_usd * USD), int(month_usd * USD))


# -- amounts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "micro"),
    [(20, 20 * USD), ("2.50", 2_500_000), (0.1, 100_000), ("0.000001", 1), (0, 0)],
)
def test_amounts_are_dollars_turned_into_exact_micro_dollars(raw: object, micro: int) -> None:
    assert to_micro_usd(raw, setting="x") == micro


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"alice": {"day": -5}},
            "c.GpuCostHub.user_budgets['alice']['day']: -5 is negative; a budget is 0 dollars or more",
        ),
        (
            {"alice": {"day": "lots"}},
            "c.GpuCostHub.user_budgets['alice']['day']: 'lots' is not a number of dollars",
        ),
        (
            {"alice": {"day": True}},
            "c.GpuCostHub.user_budgets['alice']['day']: True is not a number of dollars",
        ),
        (
            {"*": {"week": 5}},
            "c.GpuCostHub.user_budgets['*']: unknown scope 'week'; the scopes are session, day, month",
        ),
        (
            {"alice": {"month": "0.0000001"}},
            "c.GpuCostHub.user_budgets['alice']['month']: '0.0000001' has more than 6 decimals",
        ),
        ({"alice": {"month": float("nan")}}, "c.GpuCostHub.user_budgets['alice']['month']: nan"),
        ({"alice": 20}, "c.GpuCostHub.user_budgets['alice']: expected a dict of scope"),
        ([20], "c.GpuCostHub.user_budgets: expected a dict of name"),
    ],
)
def test_a_bad_user_budget_names_the_setting_the_user_and_the_scope(
    raw: object, message: str
) -> None:
    with pytest.raises(HubConfigError) as e:
        HubBudgetPolicy(raw)
    assert str(e.value).startswith(message)


def test_a_bad_group_budget_names_its_setting() -> None:
    with pytest.raises(HubConfigError, match=r"^c\.GpuCostHub\.group_budgets\['ml'\]\['day'\]"):
        HubBudgetPolicy(None, {"ml": {"day": -1}})
    with pytest.raises(HubConfigError, match=r"^c\.GpuCostHub\.group_budgets: '\*' is not a group"):
        HubBudgetPolicy(None, {"*": {"day": 1}})


# -- which budgets apply ----------------------------------------------------------------


def test_a_users_own_entry_overrides_everyones_scope_by_scope() -> None:
    policy = HubBudgetPolicy(
        {"*": {"session": 5, "day": 20, "month": 200}, "alice": {"month": 500, "session": None}}
    )
    assert policy.for_user("alice") == {"day": 20 * USD, "month": 500 * USD}
    assert policy.for_user("bob") == {"session": 5 * USD, "day": 20 * USD, "month": 200 * USD}
    assert HubBudgetPolicy().for_user("bob") == {}


def test_standings_compare_each_budget_with_the_right_spend() -> None:
    policy = HubBudgetPolicy(
        {"*": {"session": 5, "day": 20, "month": 200}},
        {"ml": {"day": 50, "month": 1000}, "physics": {"session": 2}},
    )
    alice = totals("alice", today_usd=12.5, month_usd=150)
    pooled = {"ml": GroupTotals("ml", 51 * USD, 400 * USD)}
    standings = policy.standings("alice", ["physics", "ml", "art"], 3 * USD, alice, pooled)
    assert standings == [
        HubBudget("session", 5 * USD, 3 * USD, "user"),
        HubBudget("day", 20 * USD, 12_500_000, "user"),
        HubBudget("month", 200 * USD, 150 * USD, "user"),
        HubBudget("day", 50 * USD, 51 * USD, "group:ml"),
        HubBudget("month", 1000 * USD, 400 * USD, "group:ml"),
        # a group's session budget caps each member's own session
        HubBudget("session", 2 * USD, 3 * USD, "group:physics"),
    ]
    assert [(b.scope, b.source) for b in exceeded(standings)] == [
        ("day", "group:ml"),
        ("session", "group:physics"),
    ]
    assert policy.budgeted_groups(["physics", "ml", "art"]) == ["ml", "physics"]


def test_callables_choose_budgets_per_user_and_group() -> None:
    seen: list[tuple[str, tuple[str, ...]]] = []

    def per_user(user: str, groups: tuple[str, ...]) -> object:
        seen.append((user, groups))
        return {"day": 100} if "staff" in groups else {"day": 10}

    policy = HubBudgetPolicy(per_user, lambda group: {"month": 7} if group == "ml" else None)
    assert policy.for_user("alice", ["staff"]) == {"day": 100 * USD}
    assert policy.for_user("bob", []) == {"day": 10 * USD}
    assert seen == [("alice", ("staff",)), ("bob", ())]
    assert policy.for_group("ml") == {"month": 7 * USD}
    assert policy.for_group("art") == {}


def test_a_callable_that_fails_keeps_the_users_last_budgets_or_names_the_setting() -> None:
    answers: list[object] = [{"day": 10}, RuntimeError("LDAP down"), {"day": -1}]

    def flaky(user: str, groups: tuple[str, ...]) -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    policy = HubBudgetPolicy(flaky)
    assert policy.for_user("alice") == {"day": 10 * USD}
    assert policy.for_user("alice") == {"day": 10 * USD}  # raised: the last budgets stay
    assert policy.for_user("alice") == {"day": 10 * USD}  # invalid: the last budgets stay
    with pytest.raises(HubConfigError, match=r"^c\.GpuCostHub\.user_budgets\('bob'\)\['day'\]"):
        HubBudgetPolicy(lambda u, g: {"day": -1}).for_user("bob")
    with pytest.raises(HubConfigError, match=r"^c\.GpuCostHub\.user_budgets\('bob'\) failed"):
        HubBudgetPolicy(lambda u, g: 1 / 0).for_user("bob")


# -- what the user reads ----------------------------------------------------------------


def test_the_messages_say_which_budget_whose_and_how_much() -> None:
    mine = HubBudget("day", 20 * USD, 20_410_000, "user")
    group = HubBudget("month", 500 * USD, 120 * USD, "group:ml")
    assert describe(mine) == (
        "Your day budget of $20.00 (set by your hub admin) is spent: $20.41 today."
    )
    assert describe(group) == (
        "Group ml's month budget of $500.00 (set by your hub admin) stands at: $120.00 this month."
    )


def test_a_spawn_is_refused_over_a_day_or_month_budget_not_a_session_one() -> None:
    session = HubBudget("session", 5 * USD, 9 * USD, "user")
    month = HubBudget("month", 200 * USD, 200 * USD, "group:ml")
    assert spawn_refusal([session]) is None
    assert spawn_refusal([session, month]) == (
        "Your server cannot start. Group ml's month budget of $200.00 (set by your hub admin) "
        "is spent: $200.00 this month."
    )


def test_a_refused_spawn_is_said_in_the_user_s_language_and_the_hub_s_currency() -> None:
    from jupyter_gpucost.core.i18n import messages_for

    month = HubBudget("month", 200 * USD, 200 * USD, "user")
    refusal = spawn_refusal([month], messages_for("zh_CN"), "¥")
    assert refusal is not None
    assert refusal.startswith("您的服务器无法启动。")
    assert "Your server" not in refusal
    assert "¥200.00" in refusal
    assert "$" not in refusal


def test_the_hub_pages_show_each_kind_of_figure_by_its_own_rule() -> None:
    from jupyter_gpucost.core.i18n import messages_for
    from jupyter_gpucost.hub.web.page_words import page_words

    english = page_words(messages_for("en"), "€")
    # a budget as it is announced, never rounded to nothing
    assert english["budget_text"](0.000001) == "€0.000001"
    assert english["budget_text"](5) == "€5.00"
    # an hourly rate: two decimals, never four
    assert english["rate_text"](6.8625) == "€6.86/h"
    assert english["rate_amount"](0.5) == "€0.50"
    assert english["ngettext"]("{count} disagreement", "{count} disagreements", 1) == (
        "{count} disagreement"
    )
    chinese = page_words(messages_for("zh_CN"), "¥")
    assert chinese["rate_text"](6.8625) == "¥6.86/小时"
    assert chinese["ngettext"]("{count} disagreement", "{count} disagreements", 2) == (
        "{count} 处不一致"
    )


# -- the countdown to the budget --------------------------------------------------------------------


#: $36 an hour: a cent a second
PER_HOUR = Decimal(36)


def at(rate: Decimal, *budgets: HubBudget) -> list[Weighed]:
    return [Weighed(b, rate) for b in budgets]


def test_the_countdown_starts_when_the_money_left_lasts_the_grace_and_ends_at_the_budget() -> None:
    enforcer = HubEnforcer(grace_s=120, tick_s=1)
    key = ("alice", "", NOW)
    # $2.00 left at a cent a second: 200 s, more than the grace; no countdown yet
    assert (
        enforcer.update(key, at(PER_HOUR, HubBudget("day", 20 * USD, 18 * USD, "user")), NOW)
        is None
    )
    # $1.20 left: 120 s, the grace: the countdown starts and ends when the money does
    later = NOW + timedelta(seconds=80)
    first = enforcer.update(
        key, at(PER_HOUR, HubBudget("day", 20 * USD, 18_800_000, "user")), later
    )
    assert first is not None
    assert first.stop_at == later + timedelta(seconds=120)
    assert first.plan is not None
    assert first.plan.shortened is None
    assert first.reason == (
        "Your day budget of $20.00 (set by your hub admin) stands at: $18.80 today. "
        "Stops at $20.00 — in about 2 min at $36.00/h; notebooks saved first, then the hub "
        "stops the server."
    )
    # the same rate later: the same deadline, never pushed back
    again = enforcer.update(
        key,
        at(PER_HOUR, HubBudget("day", 20 * USD, 19_400_000, "user")),
        later + timedelta(seconds=60),
    )
    assert again == first
    assert enforcer.due(first.stop_at - timedelta(seconds=1)) == []
    assert [d.key for d in enforcer.due(first.stop_at)] == [key]
    enforcer.forget(key)
    assert enforcer.due(NOW + timedelta(seconds=500)) == []


def test_a_rate_that_jumps_brings_the_stop_forward_and_says_why() -> None:
    enforcer = HubEnforcer(grace_s=120, tick_s=1)
    key = ("alice", "", NOW)
    first = enforcer.update(
        key, at(PER_HOUR, HubBudget("session", 5 * USD, 3_800_000, "user")), NOW
    )
    assert first is not None
    assert first.stop_at == NOW + timedelta(seconds=120)
    # 30 s on, the rate is four times as high: the $0.90 left lasts 22.5 s, not 90
    now = NOW + timedelta(seconds=30)
    faster = enforcer.update(
        key, at(4 * PER_HOUR, HubBudget("session", 5 * USD, 4_100_000, "user")), now
    )
    assert faster is not None
    assert faster.stop_at == now + timedelta(seconds=22.5)
    assert faster.since == NOW
    assert faster.plan is not None
    assert faster.plan.shortened == "overrun"
    assert "The 120 s grace is shortened to 52 s: at $144.00/h the full grace would go past " in (
        faster.reason
    )
    # the rate falls back: the stop stays where the money ran out at the faster rate
    slower = enforcer.update(
        key,
        at(PER_HOUR, HubBudget("session", 5 * USD, 4_200_000, "user")),
        now + timedelta(seconds=1),
    )
    assert slower == faster


def test_a_server_found_over_its_budget_is_stopped_at_once_and_told_why() -> None:
    # it started over budget, or the service was down while it went past it: no grace
    enforcer = HubEnforcer(grace_s=120)
    key = ("alice", "", NOW)
    first = enforcer.update(key, at(PER_HOUR, HubBudget("day", 20 * USD, 21 * USD, "user")), NOW)
    assert first is not None
    assert first.stop_at == NOW
    assert first.plan is not None
    assert first.plan.shortened == "spent"
    assert first.reason.startswith("Your day budget of $20.00 (set by your hub admin) is spent")
    assert first.reason.endswith(
        "The budget was already spent when it was checked: no 120 s grace, so the bill stops "
        "at the budget."
    )
    assert [d.key for d in enforcer.due(NOW)] == [key]


def test_a_deadline_kept_over_a_restart_gives_no_new_grace() -> None:
    enforcer = HubEnforcer(grace_s=120)
    key = ("alice", "", NOW)
    enforcer.restore(key, NOW, NOW + timedelta(seconds=120), "kept")
    # after the restart the budget is spent: the kept stop time holds (never a new grace)
    now = NOW + timedelta(seconds=60)
    kept = enforcer.update(key, at(PER_HOUR, HubBudget("day", 20 * USD, 21 * USD, "user")), now)
    assert kept is not None
    assert kept.stop_at == now  # the money ran out: brought forward to now
    assert kept.since == NOW


def test_raising_the_budget_clears_the_countdown_and_a_new_excess_starts_a_new_one() -> None:
    enforcer = HubEnforcer(grace_s=60)
    key = ("bob", "gpu", NOW)
    close = at(PER_HOUR, HubBudget("month", 5 * USD, 4_700_000, "group:ml"))
    assert enforcer.update(key, close, NOW) is not None
    raised = at(PER_HOUR, HubBudget("month", 50 * USD, 4_700_000, "group:ml"))
    assert enforcer.update(key, raised, NOW + timedelta(seconds=30)) is None
    assert enforcer.deadline(key) is None
    assert enforcer.due(NOW + timedelta(seconds=90)) == []
    again = enforcer.update(key, close, NOW + timedelta(seconds=40))
    assert again is not None
    assert again.stop_at == NOW + timedelta(seconds=70)


def test_servers_are_kept_apart_and_forgotten_when_the_hub_no_longer_lists_them() -> None:
    enforcer = HubEnforcer(grace_s=0)
    over = at(PER_HOUR, HubBudget("session", 1, 1, "user"))
    old = ("alice", "", NOW)
    restarted = ("alice", "", NOW + timedelta(hours=1))
    enforcer.update(old, over, NOW)
    enforcer.update(("carol", "", NOW), [], NOW)
    assert len(enforcer) == 1
    # the same server started again is a new session: no deadline inherited
    assert enforcer.deadline(restarted) is None
    enforcer.update(restarted, over, NOW + timedelta(hours=1))
    enforcer.keep_only([restarted])
    assert [d.key for d in enforcer.due(NOW + timedelta(hours=2))] == [restarted]
    with pytest.raises(ValueError, match="grace"):
        HubEnforcer(grace_s=-1)


def test_the_stop_plan_is_said_in_the_readers_language() -> None:
    from jupyter_gpucost.core.i18n import messages_for
    from jupyter_gpucost.hub.budgets import stop_plan

    budget = HubBudget("day", 20 * USD, 19 * USD, "user")
    chinese = stop_plan(budget, PER_HOUR, 100.0, 120.0, "overrun", messages_for("zh_CN"))
    plan = "在 $20.00 时停止——按 $36.00/小时 约 2 分钟 后；先保存笔记本，然后由 Hub 停止服务器。"  # noqa: RUF001
    assert plan in chinese
    assert "120 秒宽限期缩短为 100 秒" in chinese


def test_the_users_page_says_the_stop_plan_in_the_browsers_language() -> None:
    from jupyter_gpucost.core.i18n import messages_for
    from jupyter_gpucost.hub.enforcer import Plan
    from jupyter_gpucost.hub.web.page_words import stop_reason

    plan = Plan(HubBudget("session", 5 * USD, 4_700_000, "user"), PER_HOUR, 30.0, 120.0, "overrun")
    server = {"stop_plan": plan.to_json(), "reason": "kept", "budgets": []}
    english = stop_reason(server, messages_for("en"))
    assert english.startswith("Your session budget of $5.00 (set by your hub admin) stands at")
    assert "Stops at $5.00 — in about 30 s at $36.00/h; notebooks saved first" in english
    assert "The 120 s grace is shortened to 30 s" in english
    chinese = stop_reason(server, messages_for("zh_CN"))
    assert "在 $5.00 时停止" in chinese
    assert "120 秒宽限期缩短为 30 秒" in chinese
    # a deadline kept over a restart has no figures: its kept reason
    assert stop_reason(
        {"stop_plan": None, "reason": "kept", "budgets": []}, messages_for("en")
    ) == ("kept")
