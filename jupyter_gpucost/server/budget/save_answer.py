"""A page's answer to the server's request to save its open notebooks, checked: the page
is the user's, so every field is bounded and an unknown one is refused with a message."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...core.i18n import _
from ..inputs import shown
from .policy import BudgetError

#: a page's answer to a save request: how many paths, and how long each, are kept
MAX_SAVED_PATHS = 1000
MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class SaveAnswer:
    """A page's answer to a save request: which notebooks it saved, which it could not."""

    request_id: str
    client: str
    saved: list[str]
    failed: list[str]


def parse_save_answer(body: Mapping[str, object]) -> SaveAnswer:
    unknown = sorted(set(body) - {"request_id", "client", "saved", "failed"})
    if unknown:
        names = ", ".join(shown(k, 40) if not k.isidentifier() else k for k in unknown[:5])
        raise BudgetError(
            _("unknown field(s) {names}: send request_id, client, saved and failed").format(
                names=names
            )
        )
    texts: dict[str, str] = {}
    for key in ("request_id", "client"):
        value = body.get(key)
        if not isinstance(value, str) or not value.strip() or len(value) > 64:
            raise BudgetError(
                _("{key} must be a non-empty string of at most 64 characters, not {value}").format(
                    key=key, value=shown(value)
                )
            )
        texts[key] = value
    lists: dict[str, list[str]] = {}
    for key in ("saved", "failed"):
        value = body.get(key, [])
        if not isinstance(value, list) or len(value) > MAX_SAVED_PATHS:
            raise BudgetError(
                _("{key} must be a list of at most {n} notebook paths, not {value}").format(
                    key=key, n=MAX_SAVED_PATHS, value=shown(value)
                )
            )
        for n, path in enumerate(value):
            if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS:
                text = _(
                    "{key}[{n}] must be a notebook path (a string of 1 to {most} characters), "
                    "not {value}"
                )
                raise BudgetError(text.format(key=key, n=n, most=MAX_PATH_CHARS, value=shown(path)))
        lists[key] = list(value)
    return SaveAnswer(texts["request_id"], texts["client"], lists["saved"], lists["failed"])
