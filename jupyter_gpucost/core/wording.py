"""The words for values that travel as data: a budget's scope and kind, where a hub budget
comes from, a JSON value's type; a cell's time as its badge shows it; and the width of a
text in a terminal's table.

The API and the ledger keep these values as they are (``"day"``, ``"group:ml"``); what a
person reads is written here through the message catalog (:mod:`jupyter_gpucost.core.i18n`).
Each function takes the reader's :class:`~jupyter_gpucost.core.i18n.Messages`: the kernel
and the server pass none (their one language, :func:`~jupyter_gpucost.core.i18n.set_language`),
the hub service those of the page's browser.
"""

from __future__ import annotations

import math
import unicodedata
from decimal import ROUND_HALF_UP, Decimal

from .i18n import N_, Messages, current_language, messages_for

_PER_SCOPE = {
    "session": N_("{amount} per session"),
    "day": N_("{amount} per day"),
    "month": N_("{amount} per month"),
}
_SCOPE_NAMES = {
    "session": N_("session budget"),
    "day": N_("daily budget"),
    "month": N_("monthly budget"),
}
#: what a scope's budget counts, as the end of a sentence ("$2.00 today")
_PERIODS = {"session": N_("this session"), "day": N_("today"), "month": N_("this month")}
_KINDS = {
    "soft": N_("yours"),
    "hard": N_("set by the administrator"),
    "hub": N_("set by your hub admin"),
}
_TYPES = {
    "null": N_("null"),
    "boolean": N_("a boolean"),
    "number": N_("a number"),
    "string": N_("a string"),
    "array": N_("an array"),
    "object": N_("an object"),
}


def _in(messages: Messages | None) -> Messages:
    return messages if messages is not None else messages_for(current_language())


def per_scope(amount: str, scope: str, messages: Messages | None = None) -> str:
    """``$5.00 per day`` (``每天 $5.00``); an unknown scope after a slash."""
    text = _PER_SCOPE.get(scope)
    if text is None:
        return f"{amount} / {scope}"
    return _in(messages).gettext(text).format(amount=amount)


def scope_name(scope: str, messages: Messages | None = None) -> str:
    """``daily budget`` (``每日预算``) for ``day``; an unknown scope as it is."""
    text = _SCOPE_NAMES.get(scope)
    return scope if text is None else _in(messages).gettext(text)


def scope_word(scope: str, messages: Messages | None = None) -> str:
    """A scope before "budget" in a sentence: ``day`` in English (``Your day budget``),
    ``每日`` in Chinese; an unknown scope as it is."""
    pgettext = _in(messages).pgettext  # by this name, the catalog's tool finds the words
    words = {
        "session": pgettext("budget scope", "session"),
        "day": pgettext("budget scope", "day"),
        "month": pgettext("budget scope", "month"),
    }
    return words.get(scope, scope)


def period(scope: str, messages: Messages | None = None) -> str:
    """What a scope's budget counts, ending a sentence: ``today``, ``this month``."""
    text = _PERIODS.get(scope)
    return scope if text is None else _in(messages).gettext(text)


def budget_kind(kind: str, messages: Messages | None = None) -> str:
    """Whose budget: ``yours`` (soft), ``set by the administrator`` (hard), ``set by your
    hub admin`` (hub); an unknown kind as it is."""
    text = _KINDS.get(kind)
    return kind if text is None else _in(messages).gettext(text)


def hub_source(source: str, messages: Messages | None = None) -> str:
    """Whom a hub budget is set for: ``"user"`` -> ``personal``, ``"group:ml"`` ->
    ``group ml``; anything else as it is."""
    tr = _in(messages)
    if source == "user":
        return tr.gettext(N_("personal"))
    kind, sep, name = source.partition(":")
    if kind == "group" and sep:
        return tr.gettext(N_("group {group}")).format(group=name)
    return source


def json_kind(value: object) -> str:
    """What a value is, in JSON's own words: ``null``, ``boolean``, ``number``, ``string``,
    ``array`` or ``object``; a value JSON has no word for, by its Python type's name."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def json_type(kind: str, messages: Messages | None = None) -> str:
    """A JSON value's type (``number``...) as a message names it: ``a number``."""
    text = _TYPES.get(kind)
    return kind if text is None else _in(messages).gettext(text)


def columns(text: str) -> int:
    """The columns a text takes in a terminal: East Asian wide characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` columns (a table's first column)."""
    return text + " " * max(0, width - columns(text))


__all__ = [
    "budget_kind",
    "columns",
    "hub_source",
    "json_type",
    "pad",
    "per_scope",
    "period",
    "scope_name",
    "scope_word",
]


def cell_seconds(seconds: float) -> str:
    """A cell's time as its badge shows it (the front end's ``formatDuration(s, true)``):
    ``< 0.01 s`` for a trivial cell (never ``0.00 s``), ``3.20 s``, ``12.3 s``, ``2 min 05
    s``, ``1 h 02 min``, ``2 d 3 h``; ``—`` for no time. The cases both sides are tested
    against: ``labextension/src/__tests__/duration-rule.json``."""
    if not math.isfinite(seconds) or seconds < 0:
        return "—"
    if 0 < seconds < 0.005:
        return "< 0.01 s"
    if seconds < 59.95:
        # JavaScript's toFixed: the float's exact value, a tie to the larger
        step = Decimal("0.01") if seconds < 10 else Decimal("0.1")
        return f"{Decimal(seconds).quantize(step, rounding=ROUND_HALF_UP)} s"
    s = math.floor(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"
