"""``dict[str, Any]`` return types stay at the JSON boundary, and their list only shrinks.

A function that builds a document the package sends returns its ``TypedDict``
(``core/wire.py``, checked against ``wire-contract.json``); an object whose keys its owner
does not list is ``dict[str, object]``. What still returns ``dict[str, Any]`` is listed
here by module and function: a new one fails this test, and one typed since must leave the
list (so that it can only get shorter).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_gpucost"

#: "module:function" of every function whose return type still holds ``dict[str, Any]``:
#: JSON read from outside that its callers index freely (the server's answers to the
#: kernel, the Hub's user models, KubeSpawner's profiles, a probe's and a trace file's
#: lines), the cell records (a kernel's body, the ledger's JSON column) and a trait
#: validator. At most :data:`MOST` of them.
ALLOWED: frozenset[str] = frozenset(
    {
        "jupyter_gpucost.core.protocol:binding_standing",
        "jupyter_gpucost.hub.spawn_form:priced_profile_list",
        "jupyter_gpucost.hub.web.hubapi:_users",
        "jupyter_gpucost.kernel.gpu_identity:_wait",
        "jupyter_gpucost.kernel.link:request_stop",
        "jupyter_gpucost.kernel.link:set_budget",
        "jupyter_gpucost.kernel.link:status",
        "jupyter_gpucost.kernel.widgets:fetch_status",
        "jupyter_gpucost.kernel.widgets:read_status",
        "jupyter_gpucost.server.record.cells:clean",
        "jupyter_gpucost.server.record.cells:in_memory",
        "jupyter_gpucost.server.record.cells:recent",
        "jupyter_gpucost.server.record.cells:recent_cells",
        "jupyter_gpucost.server.traits:_check_overrides",
        "jupyter_gpucost.telemetry.trace:_parse",
    }
)
#: the most functions that may return ``dict[str, Any]``
MOST = 15


def untyped_returns(root: Path = PACKAGE) -> set[str]:
    """Every function under ``root`` whose return annotation holds ``dict[str, Any]``."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.returns is not None
                and "dict[str, Any]" in ast.unparse(node.returns)
            ):
                found.add(f"{module}:{node.name}")
    return found


def test_no_new_function_returns_an_untyped_dict() -> None:
    new = sorted(untyped_returns() - ALLOWED)
    assert new == [], "return a TypedDict of core/wire.py, or dict[str, object]"


def test_the_list_names_only_what_is_still_untyped() -> None:
    typed = sorted(ALLOWED - untyped_returns())
    assert typed == [], "typed since: take them off ALLOWED"
    assert len(ALLOWED) <= MOST


def test_the_walk_sees_an_untyped_return(tmp_path: Path) -> None:
    # the checks above must be able to fail
    room = tmp_path / "jupyter_gpucost"
    room.mkdir()
    (room / "doc.py").write_text(
        "from typing import Any\n"
        "def a() -> dict[str, Any]: ...\n"
        "def b() -> list[dict[str, Any]] | None: ...\n"
        "def c() -> dict[str, object]: ...\n"
        "class D:\n    async def e(self) -> dict[str, Any]: ...\n"
    )
    assert untyped_returns(room) == {
        "jupyter_gpucost.doc:a",
        "jupyter_gpucost.doc:b",
        "jupyter_gpucost.doc:e",
    }
