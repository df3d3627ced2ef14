"""The soft budget's amount under either of its names (``amount``, and the deprecated
``amount_usd``; docs/api.md "Money keys"): a property over what a person or a script could
send. One name alone is read exactly as the other; both together are taken when they say
one amount and refused with a sentence when they do not."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_agents_tools import amounts as agent_amounts

from jupyter_gpucost.server.budget.parse import parse_soft_request
from jupyter_gpucost.server.budget.policy import Budget, BudgetError

#: what an agent could send as an amount, and the same amounts written other ways
amounts = st.one_of(
    agent_amounts, st.sampled_from(["5.0", " 5 ", "5.000001", "12.50", "12.5", "1E+1"])
)
scopes = st.sampled_from(["session", "day", "month", "week", None])


def outcome(body: dict[str, object]) -> Budget | str | None:
    """The budget a body asks for, or the sentence it is refused with."""
    try:
        return parse_soft_request(body)
    except BudgetError as e:
        return f"refused: {e}"


@settings(max_examples=200, deadline=None)
@given(amount=amounts, scope=scopes)
def test_either_name_alone_reads_the_same(amount: object, scope: str | None) -> None:
    extra = {} if scope is None else {"scope": scope}
    assert outcome({"amount": amount, **extra}) == outcome({"amount_usd": amount, **extra})


@settings(max_examples=300, deadline=None)
@given(new=amounts, old=amounts)
def test_both_names_are_taken_only_when_they_say_one_amount(new: object, old: object) -> None:
    both = outcome({"amount": new, "amount_usd": old})
    alone_new, alone_old = outcome({"amount": new}), outcome({"amount_usd": old})
    if isinstance(alone_new, str) or isinstance(alone_old, str):
        # a bad amount under either name is refused with its own sentence
        assert isinstance(both, str)
        assert both in (alone_new, alone_old)
    elif alone_new == alone_old:
        assert both == alone_new
    else:
        assert isinstance(both, str)
        assert "amount and amount_usd are two names for one amount, but they differ" in both


def test_the_same_amount_written_two_ways_is_one_amount() -> None:
    assert outcome({"amount": "12.50", "amount_usd": 12.5}) == Budget("soft", 12_500_000, "session")
    assert outcome({"amount": None, "amount_usd": None}) is None
    assert outcome({"amount": 5, "amount_usd": 6}) == (
        "refused: amount and amount_usd are two names for one amount, but they differ "
        "(5 and 6): send one of them"
    )
