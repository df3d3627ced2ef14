"""The agents' tools without a server: an agent's budget can only be lower than every budget
in force (a property over what an agent could send), arguments a tool does not take are
refused, and the tools' schemas are translated when listed."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.i18n import _, set_language
from jupyter_gpucost.core.refusal import Refusal
from jupyter_gpucost.server.agents.schemas import TOOLS
from jupyter_gpucost.server.agents.tools import MAX_ESTIMATE_S, parse_duration, unknown_fields
from jupyter_gpucost.server.budget.parse import parse_lower_request
from jupyter_gpucost.server.budget.policy import Budget, BudgetError

HARD = Budget("hard", 5_000_000, "session", source="c.GpuCost.hard_budget_usd")
USERS = Budget("soft", 3_000_000, "session")

amounts = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(
        ["NaN", "-NaN", "sNaN", "inf", "-Infinity", "1e999999999", "-0", "0", "5", "4.9999999"]
    ),
    st.text(max_size=80),
    st.lists(st.integers(), max_size=2),
)
forged = st.dictionaries(
    st.sampled_from(["session_id", "kind", "scope", "hard", "hard_usd", "owner", "user"]),
    st.one_of(st.text(max_size=20), st.integers(), st.none()),
    max_size=3,
)


@settings(max_examples=400, deadline=None)
@given(amount=amounts, extra=forged, in_force=st.sampled_from([(HARD,), (HARD, USERS), (USERS,)]))
def test_an_agent_s_budget_is_always_below_every_budget_in_force(
    amount: object, extra: dict[str, object], in_force: tuple[Budget, ...]
) -> None:
    arguments = {"amount_usd": amount, **extra}
    refusal: Exception | None = None
    try:
        # the tool refuses fields it does not take before the budget rule reads them
        unknown_fields(arguments, ("amount_usd",))
        budget = parse_lower_request(arguments, in_force)
    except (BudgetError, Refusal) as e:
        refusal = e
    if refusal is not None:
        assert str(refusal)  # a message the agent can act on
        return
    assert not extra
    assert budget.kind == "soft"
    assert budget.scope == "session"
    assert budget.amount_micro > 0
    assert all(budget.amount_micro < b.amount_micro for b in in_force)
    # what was sent, exactly (no float drift)
    assert Decimal(budget.amount_micro) / 10**6 == Decimal(str(amount))


def test_a_user_s_day_budget_is_not_replaced_by_an_agent() -> None:
    with pytest.raises(BudgetError, match="day budget"):
        parse_lower_request({"amount_usd": 1}, (Budget("soft", 10_000_000, "day"),))


def chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_the_tools_describe_themselves_in_the_server_s_language() -> None:
    set_language("zh_CN")
    try:
        descriptions = [_(t.description) for t in TOOLS]
        properties = [
            p["description"] for t in TOOLS for p in t.input_schema()["properties"].values()
        ]
    finally:
        set_language("en")
    assert all(chinese(text) for text in descriptions), descriptions
    assert all(chinese(text) for text in properties), properties
    english = [p["description"] for t in TOOLS for p in t.input_schema()["properties"].values()]
    assert not any(chinese(text) for text in english)


@settings(max_examples=300, deadline=None)
@given(amounts)
def test_an_estimate_s_duration_is_a_number_of_seconds_in_range_or_refused(raw: object) -> None:
    refusal: Refusal | None = None
    try:
        seconds = parse_duration(raw)
    except Refusal as e:
        refusal = e
    if refusal is not None:
        assert str(refusal).startswith("duration_s must be")
        return
    assert 0 < seconds <= MAX_ESTIMATE_S
    assert not isinstance(raw, bool | str)
