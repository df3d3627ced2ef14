"""The wire documents' contract: :mod:`.wire`'s types written out as JSON kinds.

``contract()`` reads each document's ``TypedDict`` (and the parts it holds) and says, key
by key, which JSON kinds its value may be, joined by ``|``: ``string``, ``number``,
``boolean``, ``null``, ``object``, ``array``, ``any``; ``#Part`` for an object of a listed
part, ``#Part[]`` for an array of them; ``absent`` where the key may be left out.
``scripts/wire_contract.py`` writes it to ``labextension/src/__tests__/wire-contract.json``,
the file both test suites read (the way ``money-rule.json`` is shared); :func:`conforms`
checks a real document.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Literal, NotRequired, TypeAlias, Union, get_args, get_origin, is_typeddict

from . import wire, wire_report
from .wording import json_kind

#: a document's or part's keys, each with the kinds its value may be (``null|string``)
Shape: TypeAlias = dict[str, str]

ABSENT = "absent"

#: the documents of the contract, by the name the contract file gives them
DOCUMENTS: dict[str, type] = {
    "status": wire.StatusDocument,
    "kernels": wire.KernelsDocument,
    "history": wire.HistoryDocument,
    "panel": wire.PanelDocument,
    "hub_summary": wire.AdminSummary,
    "hub_report": wire_report.SpendReportJson,
    "hub_reply": wire_report.HubReplyJson,
}


def _kinds(hint: object, parts: dict[str, Shape]) -> set[str]:
    origin = get_origin(hint)
    if origin is NotRequired:
        return {ABSENT, *_kinds(get_args(hint)[0], parts)}
    if origin in (Union, types.UnionType):
        return {k for arg in get_args(hint) for k in _kinds(arg, parts)}
    if origin is Literal:
        return {k for value in get_args(hint) for k in _kinds(type(value), parts)}
    if hint is type(None) or hint is None:
        return {"null"}
    if hint is bool:
        return {"boolean"}
    if hint in (int, float):
        return {"number"}
    if hint is str:
        return {"string"}
    if hint is object:
        return {"any"}
    if is_typeddict(hint):
        assert isinstance(hint, type)
        _part(hint, parts)
        return {f"#{hint.__name__}"}
    if origin is list:
        (item,) = get_args(hint)
        if is_typeddict(item):
            return {f"{k}[]" for k in _kinds(item, parts)}
        return {"array"}
    if origin is dict or hint is dict:
        return {"object"}
    raise TypeError(f"no JSON kind for {hint!r}")


def _part(cls: type, parts: dict[str, Shape]) -> None:
    if cls.__name__ in parts:
        return
    shape: Shape = {}
    parts[cls.__name__] = shape
    for key, hint in typing.get_type_hints(cls, include_extras=True).items():
        shape[key] = "|".join(sorted(_kinds(hint, parts)))


def contract() -> dict[str, object]:
    """The contract: which part each document is, and every part's shape."""
    parts: dict[str, Shape] = {}
    for cls in DOCUMENTS.values():
        _part(cls, parts)
    return {
        "about": "Written by scripts/wire_contract.py from jupyter_gpucost/core/wire.py: "
        "do not edit by hand.",
        "documents": {name: cls.__name__ for name, cls in DOCUMENTS.items()},
        "parts": dict(sorted(parts.items())),
    }


def conforms(
    value: object, part: str, parts: Mapping[str, Mapping[str, str]], where: str = "$"
) -> list[str]:
    """What in ``value`` (a document as JSON gives it) does not match ``part``'s shape:
    one line per key missing, unknown, or of a kind the contract does not allow."""
    if not isinstance(value, dict):
        return [f"{where}: {json_kind(value)}, not an object"]
    shape = parts[part]
    found = [f"{where}.{k}: not in the contract's {part}" for k in value if k not in shape]
    for key, allowed in shape.items():
        kinds = allowed.split("|")
        at = f"{where}.{key}"
        if key not in value:
            if ABSENT not in kinds:
                found.append(f"{at}: missing")
            continue
        item = value[key]
        kind = json_kind(item)
        nested = [k[1:] for k in kinds if k.startswith("#") and not k.endswith("[]")]
        listed = [k[1:-2] for k in kinds if k.startswith("#") and k.endswith("[]")]
        if kind == "object" and nested:
            found.extend(conforms(item, nested[0], parts, at))
        elif kind == "array" and listed and isinstance(item, list):
            for n, element in enumerate(item):
                found.extend(conforms(element, listed[0], parts, f"{at}[{n}]"))
        elif kind not in kinds and "any" not in kinds:
            found.append(f"{at}: {kind}, the contract says {allowed}")
    return found
