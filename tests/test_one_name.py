"""One name per concept: no two classes of the package share a name.

A reader who meets ``Enforcer`` or ``Standing`` in a traceback, a log line or a review
should know which one it is without looking up the module: a second class that needs the
same name is a different concept and gets a name that says how it differs.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_gpucost"


def classes_by_name(root: Path) -> dict[str, list[str]]:
    """Every class defined under ``root`` (nested ones too), by name: where each is."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def shared_names(root: Path) -> dict[str, list[str]]:
    return {name: where for name, where in classes_by_name(root).items() if len(where) > 1}


def test_no_two_classes_of_the_package_share_a_name() -> None:
    shared = shared_names(PACKAGE)
    assert not shared, "classes sharing a name (rename one to say what it is):\n" + "\n".join(
        f"  {name}: {', '.join(where)}" for name, where in sorted(shared.items())
    )


def test_the_check_finds_two_classes_of_one_name(tmp_path: Path) -> None:
    # the test above would pass on an empty walk: it must see a pair, nested classes too
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    (package / "a.py").write_text("class Enforcer:\n    pass\n")
    (package / "inner" / "b.py").write_text("def f():\n    class Enforcer:\n        pass\n")
    (package / "c.py").write_text("class Other:\n    pass\n")
    assert shared_names(package) == {"Enforcer": ["pkg/a.py:1", "pkg/inner/b.py:2"]}
    assert len(classes_by_name(PACKAGE)) > 300
