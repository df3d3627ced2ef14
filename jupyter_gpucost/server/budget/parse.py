"""What a person or an admin sends as a budget, checked: amounts, scopes, thresholds and
the soft budget's request body (messages say what is accepted)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation

from ...core.i18n import _
from ...core.money import to_units
from ...core.wording import budget_kind, scope_word
from ..inputs import one_of, shown
from .policy import (
    HARD_REFUSAL,
    MAX_BUDGET_MICRO,
    SCOPES,
    Budget,
    BudgetError,
    HardBudgetRefused,
    Scope,
)


def parse_amount(raw: object, *, what: str) -> int:
    """Dollars (number or string) → integer micro-dollars, > 0, at most 6 decimals."""
    number = _("{what} must be a number of dollars, e.g. 5 or 12.50").format(what=what)
    if isinstance(raw, bool) or raw is None or not isinstance(raw, int | float | str):
        raise BudgetError(number)
    text = str(raw).strip()
    if not text.isascii() or len(text) > 64:
        raise BudgetError(number)
    try:
        # exact: a Decimal made from text is never rounded
        value = Decimal(text)
    except InvalidOperation:
        raise BudgetError(number) from None
    if not value.is_finite():
        raise BudgetError(_("{what} must be a finite number of dollars").format(what=what))
    if value <= 0:
        raise BudgetError(
            _("{what} must be more than 0 (remove the budget instead)").format(what=what)
        )
    # compared before any arithmetic, which could round or overflow (e.g. 1e999999999)
    if value > MAX_BUDGET_MICRO // 1_000_000:
        raise BudgetError(_("{what} must be at most 1000000").format(what=what))
    if value != value.quantize(Decimal("0.000001")):
        raise BudgetError(_("{what} has more than 6 decimals").format(what=what))
    return int(value.scaleb(6))


def parse_scope(raw: object, *, what: str) -> Scope:
    if isinstance(raw, str):
        value = raw.strip().lower()
        for scope in SCOPES:
            if value == scope:
                return scope
    raise BudgetError(one_of(what, SCOPES, raw))


#: the amount's name, and its deprecated name (docs/api.md, "Money keys"): either is taken
AMOUNT, AMOUNT_USD = "amount", "amount_usd"
SOFT_FIELDS = (AMOUNT_USD, AMOUNT, "scope", "kind")


def sent_amount(body: Mapping[str, object]) -> Mapping[str, object]:
    """The body with its amount under ``amount_usd`` alone: ``amount`` (the currency-neutral
    name) is taken in its place, and the two together must say the same amount (both
    ``null``, or the same number however it is written)."""
    if AMOUNT not in body:
        return body
    rest = {k: v for k, v in body.items() if k != AMOUNT}
    if AMOUNT_USD in body:
        new, old = body[AMOUNT], body[AMOUNT_USD]
        # each is checked on its own first: a bad one is refused with its usual sentence
        what = _("The budget")
        new_micro = None if new is None else parse_amount(new, what=what)
        old_micro = None if old is None else parse_amount(old, what=what)
        if new_micro != old_micro:
            raise BudgetError(
                _(
                    "amount and amount_usd are two names for one amount, but they differ "
                    "({amount} and {amount_usd}): send one of them"
                ).format(amount=shown(new), amount_usd=shown(old))
            )
    return {**rest, AMOUNT_USD: body[AMOUNT]}


def parse_soft_request(body: Mapping[str, object]) -> Budget | None:
    """``{"amount": 5, "scope": "session"}`` (or its deprecated ``amount_usd``) → the
    user's budget; ``null`` removes it."""
    if "hard" in body or "hard_usd" in body or body.get("kind") == "hard":
        raise HardBudgetRefused(_(HARD_REFUSAL))
    unknown = sorted(set(body) - set(SOFT_FIELDS))
    if unknown:
        names = ", ".join(shown(k, 40) if not k.isidentifier() else k for k in unknown[:5])
        raise BudgetError(
            _("unknown field(s) {names}: send amount_usd and scope").format(names=names)
        )
    body = sent_amount(body)
    if body.get("kind", "soft") != "soft":
        raise BudgetError(
            _("kind must be 'soft', not {value}").format(value=shown(body.get("kind")))
        )
    if "amount_usd" not in body:
        raise BudgetError(_("amount_usd is required (a number of dollars, or null)"))
    if body["amount_usd"] is None:
        if body.get("scope") is not None:
            parse_scope(body["scope"], what="scope")
        return None
    # the user reads this in the panel or the dialog: the budget, not the field's name
    amount = parse_amount(body["amount_usd"], what=_("The budget"))
    scope = parse_scope(body.get("scope", "session"), what="scope")
    return Budget("soft", amount, scope)


def parse_thresholds(raw: Iterable[object], *, what: str) -> tuple[int, ...]:
    values = []
    for item in raw:
        try:
            pct = int(str(item).strip())
        except ValueError:
            raise BudgetError(f"{what}: {item!r} is not a whole percentage") from None
        if not 1 <= pct <= 99:
            raise BudgetError(f"{what}: {pct} must be a percentage from 1 to 99")
        values.append(pct)
    return tuple(sorted(set(values)))


def parse_lower_request(body: Mapping[str, object], in_force: Iterable[Budget]) -> Budget:
    """``{"amount_usd": 2}`` from an agent → a session budget lower than every budget in
    force (the admin's, the hub's and the user's own): an agent can lower the limit, never
    raise or remove one, nor replace the user's day or month budget."""
    if body.get("amount_usd") is None:
        raise BudgetError(_("amount_usd is required: a number of dollars, lower than the budget"))
    budget = parse_soft_request({"amount_usd": body["amount_usd"], "scope": "session"})
    assert budget is not None
    for current in in_force:
        if current.kind == "soft" and current.scope != "session":
            raise BudgetError(
                _(
                    "the user has set a {scope} budget; an agent cannot replace it with a "
                    "session budget"
                ).format(scope=scope_word(current.scope))
            )
        if budget.amount_micro >= current.amount_micro:
            raise BudgetError(
                _(
                    "an agent can only lower the budget: {amount} is not below the budget "
                    "of {limit} ({kind})"
                ).format(
                    amount=_as_sent(budget.amount_micro),
                    limit=_as_sent(current.amount_micro),
                    kind=budget_kind(current.kind),
                )
            )
    return budget


def _as_sent(micro: int) -> str:
    """An amount as it was sent, exactly: ``2``, ``0.5``, ``1.234567``."""
    return f"{to_units(micro).normalize():f}"
