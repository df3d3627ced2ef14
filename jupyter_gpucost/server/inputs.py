"""What a request may carry, checked without tornado: bodies, query numbers, quoted values.

Every route reads its body and its numeric query parameters through these functions, so a
malformed request gets the same kind of answer everywhere: ``Refusal`` with a message
that names the offending field (the base handler turns it into a ``400``), never a crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..core.i18n import _
from ..core.refusal import Refusal
from ..core.wording import json_kind, json_type

#: how much of a refused value a message quotes
SHOWN_CHARS = 60
#: how deep a body's arrays and objects may nest (no route needs more than 3)
MAX_DEPTH = 32


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A refused value as a message quotes it: its repr (JSON's words for null, true and
    false), cut short when long."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(value) if isinstance(value, str) else len(text)} characters)"


def is_unicode(text: str) -> bool:
    """False for a string with a lone surrogate (``"\\ud800"`` in JSON), which no file,
    database or page can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check(value: object, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise Refusal(_too_deep())
    if isinstance(value, str):
        if not is_unicode(value):
            raise Refusal(
                _("{where} is not valid Unicode text (a lone surrogate)").format(
                    where=where or _("the body")
                )
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if not is_unicode(key):
                raise Refusal(
                    _("a field name in {where} is not valid Unicode text").format(
                        where=where or _("the body")
                    )
                )
            _check(item, name, depth + 1)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _check(item, f"{where}[{n}]", depth + 1)


def json_object(raw: bytes | None) -> dict[str, object]:
    """A request body as a JSON object (an empty body is ``{}``), or ``Refusal``."""
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except RecursionError:
        raise Refusal(_too_deep()) from None
    except ValueError:
        raise Refusal(_("the body must be JSON")) from None
    if not isinstance(body, dict):
        raise Refusal(_("the body must be a JSON object, not {what}").format(what=type_name(body)))
    _check(body, "", 1)
    return body


def one_of(what: str, allowed: Iterable[str], value: object) -> str:
    """``scope must be one of session, day, month, not 'week'``, in the server's language."""
    return _("{key} must be one of {allowed}, not {value}").format(
        key=what, allowed=", ".join(allowed), value=shown(value)
    )


def _too_deep() -> str:
    return _("the body nests more than {depth} levels deep").format(depth=MAX_DEPTH)


def type_name(value: object) -> str:
    """What a JSON value is, as a message names it (``a number``), in the server's
    language."""
    return json_type(json_kind(value))


def whole_number(raw: str | None, *, what: str, default: int, low: int, high: int) -> int:
    """A query parameter that is a whole number from ``low`` to ``high``."""
    if raw is None:
        return default
    text = raw.strip()
    # ASCII digits only: int() also reads other scripts' digits and '1_000'
    if not (text.isascii() and text.isdigit() and len(text) <= 9) or not (low <= int(text) <= high):
        raise Refusal(
            _("{what} must be a whole number from {low} to {high}, not {value}").format(
                what=what, low=low, high=high, value=shown(raw)
            )
        )
    return int(text)
