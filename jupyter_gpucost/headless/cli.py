"""``jupyter gpucost``: the command line (``jupyter gpucost run NOTEBOOK …``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..core.i18n import _

USAGE = (
    "jupyter gpucost run NOTEBOOK [-p NAME VALUE …] [--budget USD] [--stop-instance-when-done]"
    " | jupyter gpucost reconcile SOURCE [--since DATE] [--json]"
    " | jupyter gpucost export-focus OUT [--since DATE] [--currency CODE]"
)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or words[0] in ("-h", "--help"):
        print(_("usage: {usage}").format(usage=USAGE))
        return 0 if words else 2
    if words[0] == "run":
        from .run import main as run

        return run(words[1:])
    if words[0] == "reconcile":
        from ..reconcile.cli import main as reconcile

        return reconcile(words[1:])
    if words[0] == "export-focus":
        from ..reconcile.export import main as export_focus

        return export_focus(words[1:])
    print(_("jupyter gpucost: unknown command {word!r}").format(word=words[0]), file=sys.stderr)
    print(_("usage: {usage}").format(usage=USAGE), file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
